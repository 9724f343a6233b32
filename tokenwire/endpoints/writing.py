"""Writing an open event stream to a wire: one writer process, one heartbeat, one record of how it ended.

How this works: the adapter has sent the ``200`` and its headers and hands
over a wire (``EventWire``: the ``LoopWire`` a ``Send`` effect writes to,
with flow control, plus what it counts and how it ends).  ``write_events``
makes the connection's channel, spawns the stream's writer (``Stream.serve``)
on the registry's event-loop driver with the heartbeat (``frames.HEARTBEAT``,
a ``: ping`` comment line with no blank line after it, sent between two
frames after ``heartbeat_s`` of silence: the writer's own, whatever the
server and whatever the route, so no decoder makes an event of it), and when
the writer ends gives the open-stream slot back, records a ``ConnectionLog``,
lets go of the stream if the writer failed (the log lost it), and ends the
wire.  Its ``Writing`` is what the server may do meanwhile: say the peer is
gone (an ASGI ``http.disconnect``, before the writer notices), or close the
stream at a frame boundary (a shutdown, or ``max_duration_s`` reached: the
``retry`` of the connection's first frame has told an ``EventSource`` how
soon to come back with ``Last-Event-ID``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from ..core.channel import BoundedChannel
from ..core.frames import TokenItem
from ..core.stream import Ending, Stream
from ..core.tokenlog import LogError
from .config import ConnectionLog, LiveConfig
from .decisions import OpenStream
from .registry import Registry

__all__ = ["WRITE_BATCH", "EventWire", "Writing", "write_events"]

# Entries ready together (a resume's replay, a follower's read of the log) that go out in one write: 277
# replayed tokens are 5 writes, not 277, and the reader gets the same bytes.
WRITE_BATCH = 64


class EventWire(Protocol):
    """What the endpoints write an event stream to.

    ``send`` is the ``LoopWire`` call (True: taken; False: the peer is gone;
    None: ``resume`` comes later); ``failure`` says why the peer was declared
    gone (None while it is not); ``bytes_sent`` counts what was written;
    ``snapshot`` is ``(bytes delivered, token frames sent)``; ``end`` finishes
    the response once what was written has gone out.
    """

    failure: str | None
    bytes_sent: int

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None: ...
    def snapshot(self) -> tuple[int, int]: ...
    def end(self) -> None: ...


class Writing:
    """One event stream being written: what the server can do to it before its writer ends.

    ``gone``: the server learnt the peer left (an ASGI ``http.disconnect``)
    before the writer did: the stream is let go now.  ``close``: the server is
    shutting down: the writer ends after the frame it is writing (recorded as
    closed by the server), and the reader resumes elsewhere.  ``error``: what
    the writer raised once it ended (a ``LogError``: the log failed), else None.
    """

    __slots__ = ("_channel", "_stream", "closing", "error")

    def __init__(self, stream: Stream, channel: BoundedChannel[TokenItem]) -> None:
        self._stream, self._channel = stream, channel
        self.closing = False
        self.error: BaseException | None = None

    def gone(self) -> None:
        self._stream.disconnect(self._channel)

    def close(self, *, cancel: bool = True) -> None:
        self.closing = True
        self._stream.disconnect(self._channel, cancel=cancel)

    def expire(self) -> None:
        """``max_duration_s`` reached: the connection ends after its frame, the stream goes on for the reconnect."""
        self.close(cancel=False)


def write_events(decision: OpenStream, wire: EventWire, registry: Registry, config: LiveConfig,
                 record: Callable[[ConnectionLog], None], ended: Callable[[Writing], None]) -> Writing:
    """Spawn the writer of ``decision`` on ``wire``; returns its ``Writing`` (``ended`` gets it when it ends)."""
    live, stream = decision.live, decision.live.stream
    channel: BoundedChannel[TokenItem] = stream.new_channel()
    cut = live.take_cut(decision.cut)
    writer = stream.serve(decision.cursor, channel, cut_after=cut, heartbeat_ns=round(config.heartbeat_s * 1e9),
                          rendering=decision.rendering, batch=WRITE_BATCH)
    writing = Writing(stream, channel)
    done = registry.loop_driver().spawn(writer, wire)
    limit = None
    if config.max_duration_s is not None:       # the platform's clock: end before it kills the response
        limit = asyncio.get_running_loop().call_later(config.max_duration_s, writing.expire)

    def finished(future: asyncio.Future[Any]) -> None:
        if limit is not None:
            limit.cancel()
        registry.close_slot()
        ending: Ending | None = None
        if not future.cancelled():
            writing.error = future.exception()
            ending = future.result() if writing.error is None else None
        ended(writing)
        if ending is None:
            stream.disconnect(channel)           # the writer failed (the log lost the stream): let go of it
        else:
            if writing.closing and ending is not Ending.DONE:
                ending = Ending.CLOSED_BY_SERVER
            record(ConnectionLog(stream.stream_id, decision.header, decision.query_id, decision.cursor, cut,
                                 ending, channel.sent, wire.bytes_sent, _generated(registry, stream),
                                 wire.failure, channel.stats()))
        wire.end()

    done.add_done_callback(finished)
    return writing


def _generated(registry: Registry, stream: Stream) -> int:
    """Tokens logged when a connection ended (-1: the log lost the stream), without a blocking call."""
    if registry.aio is not None:           # a shared log is not read here (it would block the loop)
        return max(getattr(stream, "offered", -2) + 1, -1)
    try:
        return registry.log.length(stream.stream_id)
    except LogError:
        return -1
