"""One connection to a stream: the writer process that sends its opening, the replay, live tokens and its end.

How this works: ``serve`` attaches the connection's channel to the stream
(``attach``: the tokens to replay from the log, and a producer to start if
none runs), then sends what its ``Rendering`` makes of the opening, of each
token and of the end.  Replayed tokens come first, then what arrives in the
channel; an index already sent is never sent again.  The channel counts the
entries written (``sent``), whatever frames the rendering made of them.  A follower (another
reader was attached first) takes its tokens from the log each time its
doorbell rings (``catch_up``).  A heartbeat goes out between two frames when
the channel stays empty for ``heartbeat_ns``.  A log that lost the stream
(``StreamLost``) ends the connection after what it holds, with the lost
ending.  The stream is reached through ``Connected``, a protocol, so this
module does not import the stream module that calls it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import Any, Protocol

from .channel import BoundedChannel, Taken
from .effects import TIMEOUT, WRITE_FAILED, Effect, Get, Mailbox, Process, Send, Spawn
from .endings import LOST, Ending
from .frames import HEARTBEAT, TokenItem
from .rendering import FRAMES, Rendered, Rendering
from .tokenlog import StreamLost

__all__ = ["Attached", "Connected", "Writer", "serve"]

# What attaching a reader gives: the tokens to replay, and a producer to start (or None).
Attached = tuple[list[TokenItem], "Process | None"]


class Connected(Rendered, Mailbox, Protocol):
    """What a connection's writer asks of its stream (``Stream`` is one)."""

    def attach(self, cursor: int, channel: BoundedChannel[TokenItem]) -> Generator[Effect, Any, Attached]: ...
    def catch_up(self, last: int) -> Generator[Effect, Any, list[TokenItem]]: ...
    def is_follower(self, channel: BoundedChannel[TokenItem]) -> bool: ...
    def lose(self, reached: int) -> None: ...
    def disconnect(self, channel: BoundedChannel[TokenItem], *, cancel: bool = True) -> None: ...


def serve(stream: Connected, cursor: int, channel: BoundedChannel[TokenItem], *, cut_after: int | None = None,
          heartbeat_ns: int | None = None, rendering: Rendering = FRAMES, batch: int = 1) -> Process:
    """Write one connection's frames: open, replay, live tokens, done, each as ``rendering`` puts it.

    Returns (as the generator's value) the ``Ending``.  ``cut_after``
    closes the connection after that many token frames (0: right after
    the open frame).  ``batch``: up to this many entries ready together (a
    replay, what a follower read from the log) go out in one ``Send``, as
    the same bytes; the simulation keeps 1, a frame a ``Send``, as its
    reader is timed per frame.
    """
    lost = False
    try:
        replay, producer = yield from stream.attach(cursor, channel)
    except StreamLost:
        stream.lose(cursor + 1)
        replay, producer, lost = [], None, True
    follower = stream.is_follower(channel)
    if producer is not None:
        yield Spawn(producer)
    opened = rendering.opening(stream, cursor)
    if opened and not (yield Send(opened)):
        return _left(stream, channel, Ending.PEER_GONE)
    if cut_after == 0:                  # the connection dies before its first token
        return _left(stream, channel, Ending.CLOSED_BY_SERVER)
    writer = Writer(channel, rendering, cursor)
    direct = writer if cut_after is None and not follower else None    # a driver may write its tokens itself
    got: object                         # a TokenItem, a Taken reason, TIMEOUT or WRITE_FAILED
    pending: deque[TokenItem | Taken] = deque(replay)
    if lost:
        pending.append(Taken.END)       # nothing to replay: the lost ending at once
    while True:
        if pending:
            got = pending.popleft()
        else:
            got = yield Get(stream, channel, heartbeat_ns, direct)
            if follower and (isinstance(got, TokenItem) or got is Taken.END):
                pending.extend((yield from _caught_up(stream, writer.last)))    # the doorbell rang: read the log
                if got is Taken.END or stream.ending == LOST:
                    pending.append(Taken.END)
                continue
        if isinstance(got, TokenItem):
            limit = batch if cut_after is None else min(batch, cut_after - channel.sent)
            written = writer.frames(got, pending, limit)
            if written is None:
                continue                # read from the log and then offered live too: sent once
            frame, count, got = written
            if not (yield Send(frame)):
                return _left(stream, channel, Ending.PEER_GONE)
            writer.wrote(got, count)
            if cut_after is not None and channel.sent >= cut_after:
                return _left(stream, channel, Ending.CLOSED_BY_SERVER)
        elif got is WRITE_FAILED:       # a token the driver wrote for this writer found the peer gone
            return _left(stream, channel, Ending.PEER_GONE)
        elif got is TIMEOUT:
            if not (yield Send(HEARTBEAT)):      # between two frames, never inside one
                return _left(stream, channel, Ending.PEER_GONE)
        elif got is Taken.END:
            yield Send(rendering.closing(stream, cursor + 1, channel.stats().dropped))
            _left(stream, channel, Ending.DONE)
            return Ending.DONE
        else:
            return Ending.CUT if got is Taken.CUT else Ending.REPLACED


class Writer:
    """What a connection's writer has sent: the last index, and the entries counted on its channel (``sent``).

    The generator above writes through it; so may a real-time driver, for
    a token that reaches the writer while it waits caught up (``Direct``):
    the same frame, counted the same, and the writer goes on waiting.
    """

    __slots__ = ("channel", "last", "rendering")

    def __init__(self, channel: BoundedChannel[TokenItem], rendering: Rendering, cursor: int) -> None:
        self.channel, self.rendering, self.last = channel, rendering, cursor

    def frame(self, item: TokenItem) -> bytes | None:
        """``item``'s frame, or None if it was sent already (read from the log, then offered live too)."""
        return None if item.index <= self.last else self.rendering.token(item)

    def frames(self, got: TokenItem, pending: deque[TokenItem | Taken],
               limit: int) -> tuple[bytes, int, TokenItem] | None:
        """``got``'s frame and those of the entries after it in ``pending``, up to ``limit`` entries in all: the
        bytes, how many entries they hold, the last of them; None if ``got`` was sent already.  An entry already
        among them (read from the log, then offered live too) is dropped from ``pending``, as ``frame`` drops it."""
        frame = self.frame(got)
        if frame is None:
            return None
        if limit <= 1 or not pending:
            return frame, 1, got
        frames, count = [frame], 1
        while pending and count < limit:
            item = pending[0]
            if not isinstance(item, TokenItem):
                break
            pending.popleft()
            if item.index > got.index:
                frames.append(self.rendering.token(item))
                count, got = count + 1, item
        return b"".join(frames), count, got

    def wrote(self, item: TokenItem, count: int = 1) -> None:
        """The wire took the frames of ``count`` entries, the last of them ``item``."""
        self.channel.sent += count
        self.last = item.index


def _caught_up(stream: Connected, last: int) -> Generator[Effect, Any, list[TokenItem]]:
    """``catch_up``, or nothing once the log has lost the stream (the reader then gets the lost ending)."""
    if stream.ending != LOST:
        try:
            return (yield from stream.catch_up(last))
        except StreamLost:
            stream.lose(last + 1)
    return []


def _left(stream: Connected, channel: BoundedChannel[TokenItem], ending: Ending) -> Ending:
    stream.disconnect(channel)
    return ending
