"""One stream: a model, its token log, the producer, and the connections that read it.

How this works: the producer generates index ``i`` (a model step, paid for
with a ``Sleep``), appends it to the log and ``Put``s it to whichever channel
is attached.  A connection attaches a fresh channel with ``connect(cursor)``,
which is atomic (one thread, no await inside it): every index already in the log
at that moment is replayed by the writer from the log, every later one
arrives through the channel.  So a reconnect never misses an index that was
generated while it was away and never gets one twice.

If no producer is running when a connection attaches (it finished, or was
cancelled when the last reader left), ``connect`` hands back a new producer
that starts at the log's length: generation continues from the logged
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

Several readers of one stream: the first connection to attach is the
stream's reader of record, the one whose channel the producer paces to and
whose policy applies.  A connection that attaches while that reader is still
attached follows the log instead: its channel is a doorbell the producer
rings after each append, and its writer sends every index after its own
cursor from the log, so no reader kicks another off and each gets every
index once.  A reader leaving cancels the producer (``cancel``) only when no
other reader is attached.

What one connection sends (its writer, ``serve``) is ``connection``'s; how
an answer or a connection ends (``LOST``, ``STOPPED_ENDING``, ``Ending``) is
``endings``'.  Every driver runs a stream's processes on one thread, so nothing here
locks.  ``cond`` is a ``SingleThread`` notifier: every change a parked
process could be waiting for calls its ``notify_all``, which the simulation
counts and the event-loop driver hooks to retry the processes parked on the
stream.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from enum import StrEnum
from typing import Any, NamedTuple

from .channel import BoundedChannel, Outcome, Policy, Taken, check_capacity, parse_policy
from .connection import Attached, serve
from .effects import Effect, Process, Put, Sleep
from .endings import LOST, STOPPED_ENDING, STOPPED_REASON, Ending, Lost, Stopped
from .frames import DEFAULT_RETRY_MS, TokenItem, done_frame
from .model import Model
from .rendering import FRAMES, EarlyEnding, Rendering
from .sync import SingleThread
from .tokenlog import LogError, StreamState, TokenLog

# The endings and ``Attached`` live in ``endings`` and ``connection``; they are imported from here too.
__all__ = ["LOST", "STOPPED_ENDING", "STOPPED_REASON", "Attached", "CursorOutOfRange", "Ending", "Lost",
           "OnDisconnect", "Stopped", "Stream", "StreamError", "TraceEntry"]


class StreamError(Exception):
    """Base class for stream errors."""


class CursorOutOfRange(StreamError):
    """A resume cursor that is not -1 or an index of the answer."""

    def __init__(self, cursor: int, total: int) -> None:
        super().__init__(f"last event id {cursor!r} is out of range: expected -1 (from the start) to {total - 1}")
        self.cursor, self.total = cursor, total


class OnDisconnect(StrEnum):
    CANCEL = "cancel"
    DETACH = "detach"


class TraceEntry(NamedTuple):
    """One channel decision: when, which index, what happened, queue depth after, wait before.

    A named tuple rather than a frozen dataclass: one is made per channel
    operation, and this is the cheaper immutable record.
    """

    t_ns: int
    index: int  # type: ignore[assignment]  # shadows tuple.index, on purpose: it is the token index
    decision: str
    depth: int
    waited_ns: int = 0


class Stream:
    """Shared state of one stream; the producer is its generator method, a connection's writer ``serve``.

    ``meta`` is stored in the log with the stream (what another instance needs
    to rebuild it); ``attach=True`` joins a stream another instance already
    created in a shared log instead of creating it (``UnknownStream`` if it is
    not there, ``ValueError`` if its length differs from the model's);
    ``attach="checked"`` joins one the caller has already found in the log
    with the same length (a log read with ``Await`` checks it before), with
    no log call here.
    """

    def __init__(self, stream_id: str, model: Model, log: TokenLog, *, policy: Policy | str = Policy.BLOCK,
                 capacity: int = 4, on_disconnect: OnDisconnect | str = OnDisconnect.CANCEL,
                 retry_ms: int = DEFAULT_RETRY_MS, meta: Mapping[str, Any] | None = None,
                 attach: bool | str = False, cond: SingleThread | None = None, keep_trace: bool = True) -> None:
        self.stream_id, self.model, self.log = stream_id, model, log
        self.policy, self.capacity = parse_policy(policy), check_capacity(capacity)  # now, not at first connect
        self.on_disconnect = OnDisconnect(on_disconnect)
        self.retry_ms = retry_ms
        self.total = len(model)
        self.cond = SingleThread() if cond is None else cond
        self.channel: BoundedChannel[TokenItem] | None = None
        self.followers: list[BoundedChannel[TokenItem]] = []     # doorbells of readers that follow the log
        self.live_from = 0
        self.producer_running = False
        self.cancelled = False
        self.stopping = False           # asked to stop for good (``stop``): never generated further
        self.trace: list[TraceEntry] = []
        self.keep_trace = keep_trace    # a live server keeps none: only the report's detail table reads it
        self.ending: EarlyEnding | None = None    # set when the answer ended early (stopped, failed)
        if attach == "checked":
            pass
        elif attach:    # another instance created it in a shared log: check it is the same answer
            if log.total(stream_id) != self.total:
                raise ValueError(f"stream {stream_id!r} has {log.total(stream_id)} tokens in the log, "
                                 f"the model has {self.total}")
        else:
            log.create(stream_id, {**(meta or {}), "policy": self.policy.value, "capacity": capacity}, self.total)

    def new_channel(self) -> BoundedChannel[TokenItem]:
        """Return an empty channel with this stream's capacity and policy."""
        return BoundedChannel(self.capacity, self.policy)

    # -- connections -------------------------------------------------------
    def connect(self, cursor: int, channel: BoundedChannel[TokenItem]) -> tuple[list[TokenItem], Process | None]:
        """Attach ``channel`` for a reader that has ``0..cursor``.

        Returns the tokens to replay from the log and, when no producer is
        running and tokens remain, a producer process to start.  While
        another reader is attached, ``channel`` joins as a follower (see
        ``is_follower``).  Raises ``CursorOutOfRange``, or the log's
        ``LogGap``/``UnknownStream``.
        """
        if not -1 <= cursor < self.total:
            raise CursorOutOfRange(cursor, self.total)
        # Every log call that can fail comes first, so a failure leaves the stream as it was.
        live_from = self.log.length(self.stream_id)
        tokens = self.log.read_after(self.stream_id, cursor, max(0, live_from - cursor - 1))
        if not self.stopping and self.log.state(self.stream_id) is StreamState.STOPPED:
            self._readers_stopped(live_from)                   # stopped before this object knew it
        return self.join(cursor, channel, live_from, tokens)

    def join(self, cursor: int, channel: BoundedChannel[TokenItem], live_from: int, tokens: list[str], *,
             mark: bool = True) -> tuple[list[TokenItem], Process | None]:
        """``connect`` once the log has been read: ``live_from`` tokens logged, ``tokens`` those after ``cursor``.

        ``mark``: record the stream as generating when a producer starts (a
        shared log's lease claim does that itself).
        """
        replay = [TokenItem(i, t) for i, t in enumerate(tokens, cursor + 1)]
        if self.channel is not None and not self.channel.reader_gone:   # another reader is attached
            if live_from >= self.total:
                channel.close()               # all logged: the replay is the whole rest, then `done`
            else:
                self.followers.append(channel)
            self.cond.notify_all()
            return replay, None
        start = live_from < self.total and not self.producer_running
        if start and mark:
            self.log.set_state(self.stream_id, StreamState.GENERATING)
        if self.channel is not None:
            self.channel.abandon()
        # A reader joining never undoes a stop (``stop_generating``) that the producer has not yet seen.
        self.channel, self.live_from, self.cancelled = channel, live_from, self.stopping
        producer = None
        if live_from >= self.total:
            channel.close()
        elif start:
            self.producer_running = True
            producer = self.produce(live_from)
        self.cond.notify_all()
        return replay, producer

    def attach(self, cursor: int, channel: BoundedChannel[TokenItem]) -> Generator[Effect, Any, Attached]:
        """``connect`` as a step of the writer: a log that must be awaited (Redis) reads here with ``Await``."""
        return self.connect(cursor, channel)
        yield  # unreachable: it makes this a generator, as an override that awaits is

    def catch_up(self, last: int) -> Generator[Effect, Any, list[TokenItem]]:
        """What the log holds after index ``last``, as a step of the writer (a follower's doorbell rang)."""
        return self._logged_after(last)
        yield  # unreachable, as in attach

    def is_follower(self, channel: BoundedChannel[TokenItem]) -> bool:
        """True if ``channel`` follows the log (another reader was attached when it connected)."""
        return any(f is channel for f in self.followers)

    def stop_generating(self) -> None:
        """Stop generating for good (``POST /streams/<id>/stop``); harmless twice, and on a finished stream.

        A running producer stops before its next token; every reader gets
        what was logged, then the early-stop ``done`` (``"stopped_early":
        true``), and so does any later reader.  The log's state becomes
        ``stopped`` (a finished stream stays ``done``).  The log's calls here are
        a memory log's; a stream on a shared log overrides this.
        """
        self.stopping = True
        if self.producer_running:
            self.log.set_state(self.stream_id, StreamState.STOPPED)     # a reconnect meanwhile gets the ending
            self.cancelled = True             # the producer ends within one token (``_stop_if_cancelled``)
            self.cond.notify_all()
        elif self.log.state(self.stream_id) is not StreamState.DONE:
            self._stopped_at(self.log.length(self.stream_id))

    def _stopped_at(self, total: int) -> None:
        """The stream stopped after ``total`` tokens: the log says so, every reader drains and ends."""
        self.log.set_state(self.stream_id, StreamState.STOPPED)
        self._readers_stopped(total)

    def _readers_stopped(self, total: int) -> None:
        self.total, self.stopping, self.ending = total, True, STOPPED_ENDING
        self._finished()

    def disconnect(self, channel: BoundedChannel[TokenItem], *, cancel: bool = True) -> None:
        """The reader of ``channel`` left; cancels the producer if ``on_disconnect`` says so and nobody else reads.

        ``cancel=False``: the server ended the connection for a reader that
        will be back at once (``max_duration_s``): the producer goes on.
        """
        channel.abandon()
        self.followers = [f for f in self.followers if f is not channel]
        if self.channel is channel:
            self.channel = None
        if cancel and self.channel is None and not self.followers:
            self.cancelled = self.stopping or self.on_disconnect is OnDisconnect.CANCEL
        self.cond.notify_all()

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
            self.cond.notify_all()
        return outcome

    def take(self, channel: BoundedChannel[TokenItem]) -> TokenItem | Taken:
        """Take from ``channel`` without waiting."""
        got = channel.take()
        if isinstance(got, TokenItem):
            self.cond.notify_all()
        return got

    def note(self, t_ns: int, index: int, decision: str, waited_ns: int = 0) -> None:
        """Record one channel decision in the trace (unless ``keep_trace`` is off)."""
        if not self.keep_trace:
            return
        channel = self.channel
        depth = len(channel) if channel is not None else 0
        self.trace.append(TraceEntry(t_ns, index, decision, depth, waited_ns))

    # -- the producer ------------------------------------------------------
    def produce(self, start: int) -> Process:
        """Generate ``start..total-1``, checking for cancellation before each token.

        A log error (the stream was evicted) stops it and ends the attached
        connection without ``done``; the error is re-raised to the driver.
        """
        cost, generate, append, sid = self.model.cost_ns, self.model.generate, self.log.append, self.stream_id
        try:
            for index in range(start, self.total):
                if self.cancelled and self._stop_if_cancelled(index):
                    return
                yield Sleep(cost(index))
                token = generate(index)
                append(sid, index, token)
                item = TokenItem(index, token)
                if self.followers:
                    self.ring(item)
                yield Put(self, item)
            self._finish()
        except LogError:
            self._lost()
            raise

    def ring(self, item: TokenItem) -> None:
        """Tell the followers the log has grown (a full doorbell is already rung)."""
        for follower in self.followers:
            if not len(follower):
                follower.offer(item)
        if self.followers:
            self.cond.notify_all()

    def _lost(self) -> None:
        self.producer_running = False
        for channel in (self.channel, *self.followers):
            if channel is not None:
                channel.abandon()      # the writers end their connections without `done`
        self.channel, self.followers = None, []
        self.cond.notify_all()

    def lose(self, reached: int) -> None:
        """The log lost the stream's tokens (``StreamLost``): it ends after ``reached`` tokens (the most a reader
        here was given), and every reader ends after what it holds, with the early ending ``LOST``."""
        self.total = max(self.total, reached) if self.ending is LOST else reached
        self.ending = LOST
        self._finished()

    def _finish(self) -> None:
        if self.stopping:                     # asked to stop as the last token was made
            self._stopped_at(self.total)
            return
        self.log.set_state(self.stream_id, StreamState.DONE)
        self._finished()

    def _finished(self) -> None:
        """The producer is done and the log says so: let every reader drain and end."""
        self.producer_running = False
        for channel in (self.channel, *self.followers):
            if channel is not None:
                channel.close()
        self.cond.notify_all()

    def _stop_if_cancelled(self, index: int) -> bool:
        if not self.cancelled:
            return False
        if self.stopping:
            self._stopped_at(index)
            return True
        self.producer_running = False
        self.log.set_state(self.stream_id, StreamState.CANCELLED)
        self.cond.notify_all()
        return True

    # -- the writer --------------------------------------------------------
    def serve(self, cursor: int, channel: BoundedChannel[TokenItem], *, cut_after: int | None = None,
              heartbeat_ns: int | None = None, rendering: Rendering = FRAMES) -> Process:
        """Write one connection's frames (``connection.serve``); returns (as the generator's value) the ``Ending``.

        A follower (see ``connect``) takes its tokens from the log each time its doorbell rings.
        """
        return serve(self, cursor, channel, cut_after=cut_after, heartbeat_ns=heartbeat_ns, rendering=rendering)

    def closing_frame(self, delivered_from: int, dropped: int) -> bytes:
        """Return the last frame of a connection that reached the end: ``done``, with the reason of an early
        ending (a subclass may end otherwise)."""
        return done_frame(self.total, delivered_from=delivered_from, dropped=dropped,
                          reason=None if self.ending is None else self.ending.reason)

    def _logged_after(self, last: int) -> list[TokenItem]:
        count = self.log.length(self.stream_id) - last - 1
        return [TokenItem(i, t) for i, t in enumerate(self.log.read_after(self.stream_id, last, count), last + 1)]

