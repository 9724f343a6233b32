"""``Kept``: a small value kept per key beside the streams (a chat's latest stream, a response's record).

How this works: with a shared log (``registry.aio``), the value lives in
Redis under the log's ``kept_key(kind, key)``, for as long as a stream is
kept (its TTL), so any instance reads what another kept.  Without one, it
lives in this process, bounded three ways, each of a kind's values: at most
``registry.max_streams`` of them, ``MAX_KEPT_BYTES`` of keys and values in
all, and none older than the memory log's streams (``max_age_ns``: a record
of a stream the log forgot answers nothing).  The one put longest ago is
forgotten first, as the memory log forgets streams.
"""

from __future__ import annotations

from collections import OrderedDict

from ..core.tokenlog import DEFAULT_MAX_AGE_NS, MemoryTokenLog
from .registry import Registry

__all__ = ["MAX_KEPT_BYTES", "Kept"]

# 4 MiB of keys and values per kind, counted in characters: a value is small (a stream id; a response's
# model, at most 256 characters, its time and a flag: under 400 bytes), so 1,024 records take under 1 MiB; this
# bounds what a principal's long name or a later, larger record could make of the count bound.
MAX_KEPT_BYTES = 4 << 20


class Kept:
    """The values kept of ``kind``'s keys (``chat``, ``response``): in memory, or in the shared log.

    ``max_bytes``: what the values kept in memory may hold in all (keys included).
    """

    def __init__(self, registry: Registry, kind: str, max_bytes: int = MAX_KEPT_BYTES) -> None:
        self.registry, self.kind, self.max_bytes = registry, kind, max_bytes
        log = registry.log
        self.max_age_ns = log.max_age_ns if isinstance(log, MemoryTokenLog) else DEFAULT_MAX_AGE_NS
        self._memory: OrderedDict[str, tuple[int, str]] = OrderedDict()    # key: (put at, in ns; value)
        self._bytes = 0

    async def get(self, key: str) -> str | None:
        """The value last put for ``key`` (None: none kept, or forgotten); raises ``LogUnavailable``."""
        if self.registry.aio is not None:
            return await self.registry.aio.kept(self.kind, key)
        self._forget_old()
        kept = self._memory.get(key)
        return None if kept is None else kept[1]

    async def put(self, key: str, value: str) -> None:
        """Keep ``value`` for ``key``, in place of what was kept; raises ``LogUnavailable``."""
        if self.registry.aio is not None:
            await self.registry.aio.keep(self.kind, key, value)
            return
        self._drop(key)
        self._memory[key] = (self.registry.clock.now(), value)
        self._bytes += len(key) + len(value)
        self._forget_old()
        while self._memory and (len(self._memory) > self.registry.max_streams or self._bytes > self.max_bytes):
            self._drop(next(iter(self._memory)))

    def __len__(self) -> int:
        """How many values are kept in memory."""
        return len(self._memory)

    def _forget_old(self) -> None:
        """Forget the values put longer than ``max_age_ns`` ago (they are in the order they were put)."""
        cutoff = self.registry.clock.now() - self.max_age_ns
        while self._memory:
            key, (put_ns, _) = next(iter(self._memory.items()))
            if put_ns >= cutoff:
                return
            self._drop(key)

    def _drop(self, key: str) -> None:
        kept = self._memory.pop(key, None)
        if kept is not None:
            self._bytes -= len(key) + len(kept[1])
