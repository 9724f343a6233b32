"""A live server's stream: the stream and its live-only settings, its spec kept in the log, and its factories.

How this works: a live stream is made from a ``RunSpec`` (the report's
parameters).  The spec is written to the token log's meta with the stream
(``spec_to_meta``), so any instance that finds the id in a shared log can
rebuild the same stream (``attach_stream``, through ``spec_from_meta``).
``new_stream``/``attach_stream`` are the factories a registry uses for the
in-memory log; a shared log's (``endpoints.logs``) are built on these.
``LiveStream`` pairs the stream with what only the live server knows: a
one-time ``cut_after``.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..core.pipeline import RunSpec
from ..core.stream import Stream
from ..core.tokenlog import TokenLog, UnknownStream

__all__ = ["SPEC_KEY", "AttachStream", "AttachStreamAsync", "LiveStream", "NewStream", "NewStreamAsync",
           "attach_stream", "new_stream", "spec_from_meta", "spec_to_meta", "stream_spec"]


@dataclass(slots=True)
class LiveStream:
    """A stream and its live-only settings.

    ``cut_after``: close the first connection that reaches this many token
    frames; used once, so the reconnect that follows completes the stream.
    """

    stream: Stream
    cut_after: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def stream_id(self) -> str:
        return self.stream.stream_id

    def take_cut(self, requested: int | None) -> int | None:
        """Return the cut to apply to a new connection (``requested`` or the stored one), at most once."""
        with self._lock:
            cut = requested if requested is not None else self.cut_after
            if cut is None or self.cut_after == -1:
                return None
            self.cut_after = -1          # spent: later connections run to the end
            return cut


# The meta key a stream's spec is kept under (``redislog.streams`` uses the
# same functions, so any instance can rebuild the others' streams).
SPEC_KEY = "spec"


# A spec's field names, read once (``dataclasses.fields`` builds its tuple anew at every call).
_SPEC_FIELDS = tuple(f.name for f in fields(RunSpec))


def spec_to_meta(spec: RunSpec) -> dict[str, Any]:
    """Return the JSON-able meta a token log keeps for a live stream (enough to rebuild it)."""
    values = ((name, getattr(spec, name)) for name in _SPEC_FIELDS)     # flat: no deep copy (asdict makes one)
    return {SPEC_KEY: {key: getattr(value, "value", value) for key, value in values}}


def spec_from_meta(meta: Mapping[str, Any]) -> RunSpec:
    """Return the spec stored by ``spec_to_meta``; raises ``ValueError`` if there is none or it is bad."""
    values = meta.get(SPEC_KEY)
    if not isinstance(values, dict):
        raise ValueError(f"the log's meta carries no stream spec: {dict(meta)!r}")
    try:
        return RunSpec(**values)
    except TypeError as exc:
        raise ValueError(f"the log's meta carries a bad stream spec: {exc}") from None


def stream_spec(stream_id: str, meta: Mapping[str, Any]) -> RunSpec:
    """The spec of ``stream_id`` from its ``meta``; raises ``UnknownStream`` if it keeps none (made by something
    that is not a live server)."""
    try:
        return spec_from_meta(meta)
    except ValueError:
        raise UnknownStream(stream_id) from None


def new_stream(stream_id: str, spec: RunSpec, log: TokenLog, *, keep_trace: bool = False,
               meta: Mapping[str, Any] | None = None) -> Stream:
    """Create a stream of ``spec`` (and ``meta``, its principal) in ``log``; returns it (traced if ``keep_trace``)."""
    return spec.stream(stream_id, log, meta={**spec_to_meta(spec), **(meta or {})}, keep_trace=keep_trace)


def attach_stream(stream_id: str, log: TokenLog) -> Stream:
    """Rebuild a stream that is in ``log`` but not in this registry; raises ``UnknownStream``."""
    return stream_spec(stream_id, log.meta(stream_id)).stream(stream_id, log, attach=True, keep_trace=False)


NewStream = Callable[..., Stream]
NewStreamAsync = Callable[..., Awaitable[Stream]]
AttachStreamAsync = Callable[[str, TokenLog], Awaitable[Stream]]
AttachStream = Callable[[str, TokenLog], Stream]
