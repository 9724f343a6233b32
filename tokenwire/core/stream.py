"""One stream: its token log, the producer its source runs, and the connections that read it.

How this works: the producer (its ``Source``'s) makes index ``i`` (a canned model's step paid for with a
``Sleep``, your model's next token, or a token another instance logged), appends it to the log and ``Put``s it
to whichever channel is attached. A connection attaches a fresh channel with ``connect(cursor)``, which is
atomic (one thread, no await inside it): every index already in the log at that moment is replayed by the
writer from the log, every later one arrives through the channel. So a reconnect never misses an index that
was generated while it was away and never gets one twice.

If no producer is running when a connection attaches (it finished, or was cancelled when the last reader left),
``connect`` hands back a new producer that starts at the log's length: generation continues from the logged
prefix, and the log refuses any second append of an index.

``on_disconnect`` says what a reader leaving does: ``cancel`` (the producer
stops before its next token, so at most one token is generated for nobody)
or ``detach`` (generation keeps filling the log, so a reconnect catches up at
once).  A ``disconnect``-policy cut never cancels: the server keeps
generating, as a hub keeps publishing, and the reader resumes from the log.

If the log loses the stream under a running producer (evicted for age or
count), the producer stops and abandons the attached channel, so the
connection ends without ``done`` (its writer sees ``Taken.GONE``) instead of
waiting for tokens that will never come; the reader's resume then gets the
log's ``UnknownStream``.  If a shared log lost the stream's tokens but not
the stream (``StreamLost``: Redis evicted them), nothing can be replayed or
generated again: every reader gets what it was given, then the early
``done`` with ``"reason": "lost"``, and a resume gets the log's 410.

Several readers of one stream: the first connection to attach is the stream's reader of record, the one whose
channel the producer paces to and whose policy applies. A connection that attaches while that reader is still
attached follows the log instead: its channel is a doorbell the producer rings after each append, and its writer
sends every index after its own cursor from the log, so no reader kicks another off and each gets every index
once. A reader leaving cancels the producer (``cancel``) only when no other reader is attached.

What fills the log is the stream's ``Source`` (``sources``): the canned
answer (``Canned``; ``redislog.streams.SharedCanned`` on a shared log) or
your model (``asgi.model_stream.ModelTokens``; ``asgi.shared_model.SharedModel``
on a shared log).  How the writer reads the log is its ``Reads``: plain
calls in memory (``LOCAL_READS``), awaited ones for Redis
(``redislog.streams.AwaitedReads``).  The stream itself is one class: the
connections, the channel, the followers and how the answer ended; what one
connection sends is ``connection``'s, how it ends ``endings``'.  Every
driver runs a stream's processes on one thread, so nothing here locks:
every change a parked process could wait for calls ``wake``, which its
``Changes`` counts and rings (the event-loop driver retries the processes
parked on the stream); a caught-up reader may be handed a token straight
(``hand_over``).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, NamedTuple, Protocol

from .changes import Changes
from .channel import BoundedChannel, Outcome, Policy, Taken, check_capacity, parse_policy
from .connection import Attached, serve
from .effects import Effect, Process, Put
from .endings import LOST, STOPPED, EarlyEnd, Ending
from .frames import DEFAULT_RETRY_MS, TokenItem, done_frame, failed_frame
from .model import Model
from .rendering import FRAMES, Rendering
from .sources import Canned, OnDisconnect, Source
from .tokenlog import StreamState, TokenLog

# ``Attached``, ``Ending`` and the sources are imported from here too.
__all__ = ["LOCAL_READS", "Attached", "Canned", "CursorOutOfRange", "Ending", "LocalReads", "OnDisconnect", "Reads",
           "Source", "Stream", "StreamError", "TraceEntry"]


class StreamError(Exception):
    """Base class for stream errors."""


class CursorOutOfRange(StreamError):
    """A resume cursor that is not -1 or an index of the answer."""

    def __init__(self, cursor: int, total: int) -> None:
        super().__init__(f"last event id {cursor!r} is out of range: expected -1 (from the start) to {total - 1}")
        self.cursor, self.total = cursor, total


class TraceEntry(NamedTuple):
    """One channel decision: when, which index, what happened, queue depth after, wait before (a named tuple:
    one is made per channel operation, and this is the cheaper immutable record)."""

    t_ns: int
    index: int  # type: ignore[assignment]  # shadows tuple.index, on purpose: it is the token index
    decision: str
    depth: int
    waited_ns: int = 0


class Reads(Protocol):
    """How a connection's writer reads the log, as steps of the writer (a log that must be awaited yields ``Await``)."""

    def attach(self, stream: Stream, cursor: int,
               channel: BoundedChannel[TokenItem]) -> Generator[Effect, Any, Attached]: ...
    def catch_up(self, stream: Stream, last: int) -> Generator[Effect, Any, list[TokenItem]]: ...


class LocalReads:
    """The log read with plain calls (a log in memory): ``Stream.connect`` and ``Stream.logged_after``."""

    def attach(self, stream: Stream, cursor: int,
               channel: BoundedChannel[TokenItem]) -> Generator[Effect, Any, Attached]:
        return stream.connect(cursor, channel)
        yield  # unreachable: it makes this a generator, as a read that awaits is

    def catch_up(self, stream: Stream, last: int) -> Generator[Effect, Any, list[TokenItem]]:
        return stream.logged_after(last)
        yield  # unreachable, as in attach


LOCAL_READS = LocalReads()


class Stream:
    """Shared state of one stream: its connections, and the ``source`` that fills its log.

    ``source``: a ``Source``, or a canned ``Model`` (its ``Canned`` source).
    ``reads``: how the writer reads ``log`` (``LOCAL_READS``: plain calls).
    ``meta`` is stored in the log with the stream (what another instance needs
    to rebuild it); ``attach=True`` joins a stream another instance already
    created in a shared log instead of creating it (``UnknownStream`` if it is
    not there, ``ValueError`` if its length differs from the source's);
    ``attach="checked"`` joins one the caller has already found in the log
    with the same length (an awaited log read checks it before), with no log
    call here.
    """

    def __init__(self, stream_id: str, source: Source | Model, log: TokenLog, *, reads: Reads = LOCAL_READS,
                 policy: Policy | str = Policy.BLOCK, capacity: int = 4,
                 on_disconnect: OnDisconnect | str = OnDisconnect.CANCEL, retry_ms: int = DEFAULT_RETRY_MS,
                 meta: Mapping[str, Any] | None = None, attach: bool | str = False, changes: Changes | None = None,
                 keep_trace: bool = True) -> None:
        self.stream_id, self.log, self.reads = stream_id, log, reads
        self.source: Source = Canned(source) if isinstance(source, Model) else source
        self.policy, self.capacity = parse_policy(policy), check_capacity(capacity)  # now, not at first connect
        self.on_disconnect = OnDisconnect(on_disconnect)
        self.retry_ms = retry_ms
        self.total = self.source.length      # the answer's length, or the most it may have until it ends
        self.changes = Changes() if changes is None else changes
        self.channel: BoundedChannel[TokenItem] | None = None
        self.followers: list[BoundedChannel[TokenItem]] = []     # doorbells of readers that follow the log
        self.live_from = 0
        self.offered = -1               # the last index offered to readers here (an awaited attach compares it)
        self.producer_running = False
        self.cancelled = False
        self.stopping = False           # asked to stop for good (``stop_generating``): never generated further
        self.trace: list[TraceEntry] = []
        self.keep_trace = keep_trace    # a live server keeps none: only the report's detail table reads it
        self.ending: EarlyEnd | None = None    # set when the answer ended early (stopped, lost, failed...)
        self.failure: Exception | None = None  # the log error that last made the producer abandon its readers
        if attach == "checked":
            pass
        elif attach:    # another instance created it in a shared log: check it is the same answer
            logged = log.total(stream_id)
            if logged != self.total:
                raise ValueError(f"stream {stream_id!r} has {logged} tokens in the log, "
                                 f"the source has {self.total}")
        else:
            log.create(stream_id, {**(meta or {}), "policy": self.policy.value, "capacity": capacity}, self.total)

    def new_channel(self) -> BoundedChannel[TokenItem]:
        """Return an empty channel with this stream's capacity and policy."""
        return BoundedChannel(self.capacity, self.policy)

    # -- connections -------------------------------------------------------
    def connect(self, cursor: int, channel: BoundedChannel[TokenItem]) -> Attached:
        """Attach ``channel`` for a reader that has ``0..cursor``, reading the log with plain calls.

        Returns the tokens to replay from the log and, when no producer is
        running and tokens remain, a producer process to start.  While
        another reader is attached, ``channel`` joins as a follower (see
        ``is_follower``).  Raises ``CursorOutOfRange``, or the log's
        ``LogGap``/``UnknownStream``.
        """
        self.check_cursor(cursor)
        # Every log call that can fail comes first, so a failure leaves the stream as it was.
        live_from = self.log.length(self.stream_id)
        tokens = self.log.read_after(self.stream_id, cursor, max(0, live_from - cursor - 1))
        if not self.stopping and self.log.state(self.stream_id) is StreamState.STOPPED:
            self.stopped_at(live_from)                   # stopped before this object knew it
        return self.join(cursor, channel, live_from, tokens)

    def check_cursor(self, cursor: int) -> None:
        """Raise ``CursorOutOfRange`` unless ``cursor`` is -1 or an index of the answer."""
        if not -1 <= cursor < self.total:
            raise CursorOutOfRange(cursor, self.total)

    def join(self, cursor: int, channel: BoundedChannel[TokenItem], live_from: int, tokens: list[str], *,
             mark: bool = True) -> Attached:
        """``connect`` once the log has been read: ``live_from`` tokens logged, ``tokens`` those after ``cursor``.

        ``mark``: record the stream as generating when a producer starts (a
        shared log's lease claim does that itself).
        """
        replay = [TokenItem(i, t) for i, t in enumerate(tokens, cursor + 1)]
        producer = None
        if self.channel is not None and not self.channel.reader_gone:   # another reader is attached
            if live_from >= self.total:
                channel.close()               # all logged: the replay is the whole rest, then `done`
            else:
                self.followers.append(channel)
        else:
            start = live_from < self.total and not self.producer_running
            if start and mark:
                self.log.set_state(self.stream_id, StreamState.GENERATING)
            if self.channel is not None:
                self.channel.abandon()
            # A reader joining never undoes a stop (``stop_generating``) that the producer has not yet seen.
            self.channel, self.live_from, self.cancelled = channel, live_from, self.stopping
            if live_from >= self.total:
                channel.close()
            elif start:
                self.producer_running = True
                producer = self.source.produce(self, live_from)
        self.source.joined(self)
        self.wake()
        return replay, producer

    def attach(self, cursor: int, channel: BoundedChannel[TokenItem]) -> Generator[Effect, Any, Attached]:
        """``connect`` as a step of the writer, through ``reads``."""
        return self.reads.attach(self, cursor, channel)

    def catch_up(self, last: int) -> Generator[Effect, Any, list[TokenItem]]:
        """What the log holds after index ``last``, as a step of the writer (a follower's doorbell rang)."""
        return self.reads.catch_up(self, last)

    def logged_after(self, last: int) -> list[TokenItem]:
        """What the log holds after index ``last``, read with plain calls."""
        count = self.log.length(self.stream_id) - last - 1
        return [TokenItem(i, t) for i, t in enumerate(self.log.read_after(self.stream_id, last, count), last + 1)]

    def is_follower(self, channel: BoundedChannel[TokenItem]) -> bool:
        """True if ``channel`` follows the log (another reader was attached when it connected)."""
        return any(f is channel for f in self.followers)

    def unread(self) -> bool:
        """True if no reader is attached here."""
        return self.channel is None and not self.followers

    def disconnect(self, channel: BoundedChannel[TokenItem], *, cancel: bool = True) -> None:
        """The reader of ``channel`` left; with nobody else reading, the source decides (``Source.left``).

        ``cancel=False``: the server ended the connection for a reader that
        will be back at once (``max_duration_s``): the producer goes on.
        """
        channel.abandon()
        self.followers = [f for f in self.followers if f is not channel]
        if self.channel is channel:
            self.channel = None
        if self.unread():
            self.source.left(self, cancel)
        self.wake()

    # -- what a source and the server ask of the stream ---------------------
    def stop_generating(self) -> None:
        """Stop generating for good (``POST /streams/<id>/stop``); harmless twice, and on a finished stream.

        A running producer stops before its next token; every reader gets
        what was logged, then the early-stop ``done`` (``"stopped_early":
        true``), and so does any later reader.
        """
        self.stopping = True
        self.source.stop_generating(self)

    def shut_down(self) -> None:
        """The server is shutting down: the source stops or hands its producer off (``Source.shut_down``)."""
        self.source.shut_down(self)

    def release(self) -> None:
        """The stream is forgotten here: the source lets go of what it holds (``Source.release``)."""
        self.source.release(self)

    def at_creation(self) -> Process | None:
        """The producer to run from the stream's creation on, if its source generates unread (None: none)."""
        if self.producer_running:
            return None
        producer = self.source.at_creation(self)
        self.producer_running = producer is not None
        return producer

    def cancel(self) -> None:
        """The producer is to stop before its next token (a reader left, the server stops, someone asked)."""
        self.cancelled = True
        self.wake()

    def idle(self) -> None:
        """The producer stopped before the end without ending the answer: the next reader starts another."""
        self.producer_running = False
        self.wake()

    def wake(self) -> None:
        """Tell the processes parked on this stream that something changed (``Changes``)."""
        self.changes.changed()

    def pass_on(self, item: TokenItem) -> Put:
        """The ``Put`` a producer yields for a logged ``item``, after ``passing`` (a call, not a generator)."""
        self.passing(item)
        return Put(self, item)

    def passing(self, item: TokenItem) -> None:
        """A logged ``item`` is about to be offered here: it is the last index offered, the followers rung first."""
        if item.index > self.offered:
            self.offered = item.index
        if self.followers:
            self.ring(item)

    def ring(self, item: TokenItem) -> None:
        """Tell the followers the log has grown (a full doorbell is already rung)."""
        for follower in self.followers:
            if not len(follower):
                follower.offer(item)
        if self.followers:
            self.wake()

    def ended(self, total: int, ending: EarlyEnd | None = None) -> None:
        """The answer is over after ``total`` tokens (``ending``: why early): every reader drains, then ends."""
        self.total, self.ending = total, ending
        self.producer_running = False
        for channel in (self.channel, *self.followers):
            if channel is not None:
                channel.close()
        self.wake()

    def stopped_at(self, total: int) -> None:
        """The answer stopped (asked to) after ``total`` tokens: readers drain, then get the early-stop ``done``."""
        self.stopping = True
        self.ended(total, STOPPED)

    def lose(self, reached: int) -> None:
        """The log lost the stream's tokens (``StreamLost``): it ends after ``reached`` tokens (the most a reader
        here was given), and every reader ends after what it holds, with the early ending ``LOST``."""
        self.ended(max(self.total, reached) if self.ending == LOST else reached, LOST)

    def abandon(self, failure: Exception | None = None) -> None:
        """The log failed under the producer (``failure``, kept as ``self.failure``): every connection ends
        without ``done`` (its reader resumes)."""
        self.producer_running = False
        self.failure = failure
        for channel in (self.channel, *self.followers):
            if channel is not None:
                channel.abandon()
        self.channel, self.followers = None, []
        self.wake()

    # -- channel operations, called by drivers ----------------------------
    def offer(self, item: TokenItem) -> Outcome:
        """Offer ``item`` to the attached channel without waiting."""
        channel = self.channel
        if channel is None or item.index < self.live_from:
            return Outcome.CLOSED   # nobody attached, or the attached reader replays it from the log
        outcome = channel.offer(item)
        if outcome is Outcome.CUT:
            self.channel = None
        if outcome is not Outcome.FULL:
            self.wake()
        return outcome

    def hand_over(self, item: TokenItem) -> bool:
        """``item`` straight to the reader of record, whose writer alone waits here on its empty channel (a driver
        found it so): True if taken (counted as ``offer`` then ``take`` would), False if ``offer`` must run."""
        channel = self.channel
        return (channel is not None and not self.keep_trace and item.index >= self.live_from
                and channel.pass_through())

    def take(self, channel: BoundedChannel[TokenItem]) -> TokenItem | Taken:
        """Take from ``channel`` without waiting."""
        got = channel.take()
        if isinstance(got, TokenItem):
            self.wake()
        return got

    def note(self, t_ns: int, index: int, decision: str, waited_ns: int = 0) -> None:
        """Record one channel decision in the trace (unless ``keep_trace`` is off)."""
        if not self.keep_trace:
            return
        channel = self.channel
        depth = len(channel) if channel is not None else 0
        self.trace.append(TraceEntry(t_ns, index, decision, depth, waited_ns))

    # -- the writer --------------------------------------------------------
    def serve(self, cursor: int, channel: BoundedChannel[TokenItem], *, cut_after: int | None = None,
              heartbeat_ns: int | None = None, rendering: Rendering = FRAMES, batch: int = 1) -> Process:
        """Write one connection's frames (``connection.serve``: ``batch`` entries ready together in one ``Send``);
        returns (as the generator's value) the ``Ending``.  A follower takes its tokens from the log."""
        return serve(self, cursor, channel, cut_after=cut_after, heartbeat_ns=heartbeat_ns, rendering=rendering,
                     batch=batch)

    def closing_frame(self, delivered_from: int, dropped: int) -> bytes:
        """The last frame of a connection that reached the end: ``failed`` for a failed answer, else ``done``
        (with the reason of an early ending)."""
        if self.ending is not None and self.ending.error is not None:
            return failed_frame(self.ending.error, self.total)
        return done_frame(self.total, delivered_from=delivered_from, dropped=dropped,
                          reason=None if self.ending is None else self.ending.reason)
