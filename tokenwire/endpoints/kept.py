"""``Kept``: a small value kept per key beside the streams (a chat's latest stream, a response's record).

How this works: with a shared log (``registry.aio``), the value lives in
Redis under the log's ``kept_key(kind, key)``, for as long as a stream is
kept (its TTL), so any instance reads what another kept.  Without one, it
lives in this process, at most ``registry.max_streams`` of each kind: the
one put longest ago is forgotten first, as the memory log forgets streams.
"""

from __future__ import annotations

from collections import OrderedDict

from .registry import Registry

__all__ = ["Kept"]


class Kept:
    """The values kept of ``kind``'s keys (``chat``, ``response``): in memory, or in the shared log."""

    def __init__(self, registry: Registry, kind: str) -> None:
        self.registry, self.kind = registry, kind
        self._memory: OrderedDict[str, str] = OrderedDict()

    async def get(self, key: str) -> str | None:
        """The value last put for ``key`` (None: none kept, or forgotten); raises ``LogUnavailable``."""
        if self.registry.aio is not None:
            return await self.registry.aio.kept(self.kind, key)
        return self._memory.get(key)

    async def put(self, key: str, value: str) -> None:
        """Keep ``value`` for ``key``, in place of what was kept; raises ``LogUnavailable``."""
        if self.registry.aio is not None:
            await self.registry.aio.keep(self.kind, key, value)
            return
        self._memory[key] = value
        self._memory.move_to_end(key)
        while len(self._memory) > self.registry.max_streams:
            self._memory.popitem(last=False)
