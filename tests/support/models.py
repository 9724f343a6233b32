"""Model factories the tests serve with ``TokenStreams``; no tests here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from tokenwire.models import StreamRequest


def yielding(items: Iterable[Any]) -> Callable[[StreamRequest], AsyncIterator[Any]]:
    """A model factory whose every stream yields ``items`` (tokens, parts, a client's stream objects), then ends."""
    def model(request: StreamRequest) -> AsyncIterator[Any]:
        async def stream() -> AsyncIterator[Any]:
            for item in items:
                yield item
        return stream()
    return model
