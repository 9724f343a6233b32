"""The live streams registry: stream id -> stream, and the limits of a live server.

How this works: ``create`` makes a ``Stream`` (a model, the shared token log,
the producer) under a fresh unguessable id (``secrets.token_urlsafe``), so
reading a stream requires having been told its id.  ``get`` finds it again;
a stream the token log has evicted (too old, or too many streams) is
forgotten here too and reported as ``UnknownStream``.  ``open_slot()`` is
the admission gate for open event streams (``close_slot()`` gives it back):
past ``max_live`` it raises ``Busy`` (a 503 with ``Retry-After``).  Producers run as
processes on the server's event-loop driver (``driver``, set when the server
starts); ``producers_running`` counts them, so a test can see a cancelled
producer actually end.  ``admit_creation`` is the per-client creation
quota (``admission.CreationQuota``), so one client's flood is refused (429)
before it can crowd out other clients' streams.

The token log is passed in (``MemoryTokenLog`` on this registry's clock by
default), which is the one seam a shared log such as Redis Streams plugs
into, with the factories (plain and awaited) that build ``Stream`` objects for it.  A
stream's spec is written to the log's meta (``live_stream.spec_to_meta``), so when
``get`` does not know an id it asks the log and, if another instance (or an
earlier eviction from this registry) left the stream there, rebuilds it
(``attach_stream``).  The limits' names (``admission``) and the live
stream's (``live_stream``) are imported from here too.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..core.clock import RealClock
from ..core.effects import Process
from ..core.pipeline import RunSpec
from ..core.stream import Stream
from ..core.tokenlog import (
    DEFAULT_MAX_AGE_NS,
    DEFAULT_MAX_STREAMS,
    MemoryTokenLog,
    StreamState,
    TokenLog,
    UnknownStream,
)
from ..realtime import LoopDriver
from .admission import DEFAULT_CREATE_BURST, DEFAULT_CREATE_RATE, DEFAULT_MAX_LIVE, Busy, CreationQuota, OverQuota
from .live_stream import (
    AttachStream,
    AttachStreamAsync,
    LiveStream,
    NewStream,
    NewStreamAsync,
    attach_stream,
    new_stream,
    spec_from_meta,
    spec_to_meta,
)

if TYPE_CHECKING:
    from ..redislog.aio import AsyncRedisLog

__all__ = ["AttachStreamAsync", "DEFAULT_CREATE_BURST", "DEFAULT_CREATE_RATE", "DEFAULT_MAX_LIVE", "STREAM_ID_BYTES",
           "Busy", "LiveStream",
           "OverQuota", "Registry", "UnknownStream", "attach_stream", "new_stream", "spec_from_meta", "spec_to_meta"]

# 16 random bytes (22 URL-safe characters, 128 bits): the id is the only key
# to a stream, so it must not be guessable or enumerable.
STREAM_ID_BYTES = 16


def _check_cut(spec: RunSpec, cut_after: int | None) -> None:
    if cut_after is not None and not 0 <= cut_after < spec.length:
        raise ValueError(f"cut_after must be from 0 to {spec.length - 1} (the answer's length - 1), got {cut_after!r}")


def _idle(stream: Stream) -> bool:
    """No producer running and no reader attached: safe to forget (the log still holds it)."""
    return not stream.producer_running and stream.channel is None


def _let_go(forgotten: LiveStream | None) -> None:
    """A stream forgotten here lets go of what it holds: a model stream closes an iterator nobody read."""
    if forgotten is not None:
        forgotten.stream.release()


class Registry:
    """Live streams by id, the producers running, and the open-stream limit.

    ``new_stream``/``attach_stream`` build the ``Stream`` objects (a shared
    log passes ones that make streams aware of other instances).
    ``max_streams`` bounds the streams kept here and, with ``max_age_ns``,
    the in-memory log made when no ``log`` is given.  Raises ``ValueError``
    for a ``max_streams``, ``max_age_ns`` or ``max_live`` below 1.
    """

    def __init__(self, log: TokenLog | None = None, *, clock: RealClock | None = None,
                 max_streams: int = DEFAULT_MAX_STREAMS, max_age_ns: int = DEFAULT_MAX_AGE_NS,
                 max_live: int = DEFAULT_MAX_LIVE, create_burst: int = DEFAULT_CREATE_BURST,
                 create_rate: float = DEFAULT_CREATE_RATE, keep_trace: bool = False,
                 new_stream: NewStream = new_stream, attach_stream: AttachStream = attach_stream,
                 new_stream_async: NewStreamAsync | None = None,
                 attach_stream_async: AttachStreamAsync | None = None) -> None:
        for name, value in (("max_streams", max_streams), ("max_age_ns", max_age_ns), ("max_live", max_live)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.quota = CreationQuota(create_burst, create_rate)
        self.keep_trace = keep_trace
        self.driver: LoopDriver | None = None        # the server's, set when it starts
        self.clock = clock or RealClock()
        self.log: TokenLog = log if log is not None else MemoryTokenLog(
            self.clock.now, max_streams=max_streams, max_age_ns=max_age_ns)
        self.max_streams, self.max_live = max_streams, max_live
        self._new_stream, self._attach_stream = new_stream, attach_stream
        # A log whose calls must be awaited (Redis) comes with async factories and its asyncio twin.
        self._new_stream_async, self._attach_stream_async = new_stream_async, attach_stream_async
        self.aio: AsyncRedisLog | None = getattr(self.log, "aio", None) if new_stream_async is not None else None
        self._streams: OrderedDict[str, LiveStream] = OrderedDict()
        self._lock = threading.Lock()
        self.live = 0
        self.peak_live = 0
        self._producers = 0

    # -- streams -----------------------------------------------------------
    def create(self, spec: RunSpec, *, cut_after: int | None = None,
               meta: Mapping[str, Any] | None = None) -> LiveStream:
        """Make a stream for ``spec`` under a new id; returns it.

        ``cut_after`` (0..tokens-1; 0 closes the connection after its open
        frame) is validated here; raises ``ValueError``.  ``meta``: more for
        the log to keep with the stream (its principal).
        """
        _check_cut(spec, cut_after)
        stream = self._new_stream(secrets.token_urlsafe(STREAM_ID_BYTES), spec, self.log, keep_trace=self.keep_trace,
                                  meta=meta)
        return self._remember(LiveStream(stream, cut_after))

    def adopt(self, stream: Stream, cut_after: int | None = None) -> LiveStream:
        """Keep a stream made elsewhere (your own model's) under its id; returns its ``LiveStream``.

        A stream that generates from its creation on (your own model on a
        shared log: ``Stream.at_creation`` gives its producer) is started here.
        """
        live = self._remember(LiveStream(stream, cut_after))
        producer = stream.at_creation()
        if producer is not None:
            self.spawn(producer)
        return live

    def _remember(self, live: LiveStream) -> LiveStream:
        with self._lock:
            live = self._streams.setdefault(live.stream_id, live)
            self._streams.move_to_end(live.stream_id)
            excess = len(self._streams) - self.max_streams
            if excess > 0:
                # Forget the oldest idle streams only: a stream with a producer or a reader
                # must stay the one object for its id, or a reconnect would start a second producer;
                # and never the one being remembered, which nobody has had a chance to read yet.
                idle = [sid for sid, known in self._streams.items()
                        if sid != live.stream_id and _idle(known.stream)][:excess]
                for sid in idle:
                    _let_go(self._streams.pop(sid))
        return live

    def get(self, stream_id: str) -> LiveStream:
        """Return the stream with this id; raises ``UnknownStream`` (never made here, or evicted).

        The blocking path, for a log whose calls need no awaiting (memory) and tools; ``get_async`` is the
        same lookup with the log's calls awaited.
        """
        live = self._known(stream_id)
        if live is None:
            stream = self._attach_stream(stream_id, self.log)   # UnknownStream if the log does not hold it
            return self._joined(stream)
        return self._still_logged(live, self.log.total, stream_id)

    def _known(self, stream_id: str) -> LiveStream | None:
        with self._lock:
            live = self._streams.get(stream_id)
            if live is not None:
                self._streams.move_to_end(stream_id)
        return live

    def _joined(self, stream: Stream) -> LiveStream:
        # A one-time cut belongs to the instance that made the stream; a
        # stream joined later runs to the end rather than being cut twice.
        return self._remember(LiveStream(stream, -1))

    def _still_logged(self, live: LiveStream, total: Callable[[str], object], stream_id: str) -> LiveStream:
        """``live``, once the log says it still holds it (``total`` raises ``UnknownStream`` otherwise)."""
        try:
            total(stream_id)
        except UnknownStream:
            self._forget(stream_id)
            raise
        return live

    def _forget(self, stream_id: str) -> None:
        with self._lock:
            _let_go(self._streams.pop(stream_id, None))

    def __len__(self) -> int:
        return len(self._streams)

    # -- the same, for code on the event loop (a shared log's calls are awaited) ------------
    async def create_async(self, spec: RunSpec, *, cut_after: int | None = None,
                           meta: Mapping[str, Any] | None = None) -> LiveStream:
        """``create``, with a shared log written by an awaited call; raises what ``create`` does."""
        if self._new_stream_async is None:
            return self.create(spec, cut_after=cut_after, **({"meta": meta} if meta else {}))
        _check_cut(spec, cut_after)
        stream = await self._new_stream_async(secrets.token_urlsafe(STREAM_ID_BYTES), spec, self.log,
                                              keep_trace=self.keep_trace, meta=meta)
        return self._remember(LiveStream(stream, cut_after))

    async def get_async(self, stream_id: str) -> LiveStream:
        """``get``, with a shared log read by awaited calls; raises ``UnknownStream``, ``LogUnavailable``."""
        if self._attach_stream_async is None or self.aio is None:
            return self.get(stream_id)
        live = self._known(stream_id)
        if live is None:
            return self._joined(await self._attach_stream_async(stream_id, self.log))
        try:
            await self.aio.total(stream_id)
        except UnknownStream:
            self._forget(stream_id)
            raise
        return live

    async def stop_async(self, stream_id: str) -> StreamState:
        """Stop ``stream_id`` for good, wherever it is generated; returns its state now (a finished one stays done).

        On a shared log the log says so first (any instance's owner sees it
        within one step); the stream here, if this instance has it, stops at
        once.  Harmless twice.  Raises ``UnknownStream``, ``LogUnavailable``.
        """
        live = await self.get_async(stream_id)
        if self.aio is not None:
            state = await self.aio.stop(stream_id)
            live.stream.stop_generating()
            return state
        live.stream.stop_generating()
        return self.log.state(stream_id)

    async def progress_async(self, stream_id: str) -> tuple[int, StreamState]:
        """The tokens the log holds for ``stream_id`` and its state, read at one instant (one call on Redis)."""
        if self.aio is not None:
            _, _, length, state = await self.aio.info(stream_id)
            return length, state
        return self.log.length(stream_id), self.log.state(stream_id)

    async def check_cursor_async(self, stream_id: str, cursor: int) -> None:
        """Raise ``LogGap`` if the log no longer holds the token after ``cursor`` (``UnknownStream``: no stream)."""
        if self.aio is not None:
            await self.aio.read_after(stream_id, cursor, 0)
        else:
            self.log.read_after(stream_id, cursor, 0)

    # -- open connections --------------------------------------------------
    def open_slot(self) -> None:
        """Take one of ``max_live`` open-stream slots (give it back with ``close_slot``); raises ``Busy``."""
        with self._lock:
            if self.live >= self.max_live:
                raise Busy(self.max_live)
            self.live += 1
            self.peak_live = max(self.peak_live, self.live)

    def close_slot(self) -> None:
        with self._lock:
            self.live -= 1

    @contextmanager
    def connection(self) -> Iterator[None]:
        """Hold one of ``max_live`` open-stream slots for the ``with`` body; raises ``Busy``."""
        self.open_slot()
        try:
            yield
        finally:
            self.close_slot()

    # -- creation quota ----------------------------------------------------------
    def admit_creation(self, client: str) -> None:
        """Take one stream creation from ``client``'s allowance (``CreationQuota``); raises ``OverQuota``."""
        self.quota.admit(client)

    # -- producers -----------------------------------------------------------
    def spawn(self, proc: Process) -> None:
        """Run a producer ``proc`` on the server's event-loop driver, counted in ``producers_running``."""
        driver = self.loop_driver()
        with self._lock:
            self._producers += 1
        driver.spawn(proc).add_done_callback(self._producer_ended)

    def loop_driver(self) -> LoopDriver:
        """The server's event-loop driver; raises ``RuntimeError`` before the server has started."""
        if self.driver is None:
            raise RuntimeError("the registry has no driver: start the server before streaming")
        return self.driver

    def _producer_ended(self, future: object) -> None:
        """A producer ended (its error, if any, went to the driver's ``on_error``: a log error is expected)."""
        with self._lock:
            self._producers -= 1

    @property
    def producers_running(self) -> int:
        """How many producers are running right now."""
        return self._producers
