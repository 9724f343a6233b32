"""OpenAI's wire, what its two dialects share: who answered, the reader inside the server, the error body.

How this works: a stream is indexed entries (text, or a typed part:
``tokenwire.core.parts``) plus an ending; OpenAI's two dialects put it on the
wire as the ``openai`` SDK reads it, each event one ``data:`` line of JSON
and no ``id`` (the SDK resumes a response by ``starting_after``, not
``Last-Event-ID``).  Each dialect is one module that owns its rendering, its
whole objects and its numbers: ``openai_chat`` (chat completion chunks) and
``openai_responses`` (Responses events, numbered by ``sequence_number``).
What they share is here: ``Answered`` (the id, model and creation time every
chunk and event repeats) and ``Gathered``, the rendering of a reader inside
the server that keeps the entries of an answer that is sent whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core.endings import EarlyEnd
from ..core.frames import TokenItem
from ..core.rendering import Rendered

__all__ = ["Answered", "Gathered", "compact_json", "error_body"]


def compact_json(value: object) -> str:
    """``value`` as JSON with no spaces: what every chunk and event carries."""
    return json.dumps(value, separators=(",", ":"))


def error_body(message: str) -> dict[str, Any]:
    """OpenAI's error object for a model that failed (``message`` names the failure)."""
    return {"message": message, "type": "server_error", "code": None}


@dataclass(frozen=True, slots=True)
class Answered:
    """Who answers and when: the completion's or response's ``id``, ``model`` and ``created`` (Unix seconds)."""

    id: str
    model: str
    created: int


@dataclass(slots=True)
class Gathered:
    """The ``Rendering`` of a reader inside the server: it puts nothing on a wire and keeps the entries and ending."""

    tokens: list[str] = field(default_factory=list)
    ended: bool = False
    ending: EarlyEnd | None = None

    def opening(self, stream: Rendered, cursor: int) -> bytes:
        return b""

    def token(self, item: TokenItem) -> bytes:
        self.tokens.append(item.text)
        return b""

    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes:
        self.ended, self.ending = True, stream.ending
        return b""
