"""Your own model's streams on a shared log (Redis): one process generates, the others follow the log.

How this works: the process whose request created the stream owns its model
(an async iterator that lives only there), and starts it at once, at
creation, whoever reads it and wherever: the model is stepped there, every
token is logged (through the process's group commit, fenced by the lease)
before it is sent, and every reader anywhere follows the log.  So a first
read that lands on another process (half the POST-then-GET pairs behind a
load balancer) finds a stream whose owner is alive and generating, never one
that looks abandoned because nobody started it.  ``SharedModel`` (a
stream's source) with an iterator is that owner: it takes the stream's lease as it starts (the
process's log writer renews all its leases together on a timer) and records
how the model ended (``done``, or ``cancelled`` for an early stop or an
error).  With no iterator to pull (built by ``attach``: a reconnect, or a
second reader, landed on another process; or an owner whose producer a log
error stopped), it follows: it waits on the process's
shared ``XREAD`` for new tokens and passes them on; when the log stops
growing it reads the stream's state: ``done`` ends the stream with the
plain ``done``, ``cancelled`` with the early-stop ``done``, and a stream
still marked generating whose lease nobody has held for a whole lease
period lost its owner (the process died): the follower marks it cancelled
and ends it with the early-stop ``done`` (reason ``owner lost``) instead of
waiting forever.

A reader leaving (``on_disconnect="cancel"``) cancels only when no process
has a reader attached: each process with a reader of the stream holds an
entry in its readers set (``redislog.presence``: joined by the first reader
there, renewed on the log writer's timer, left by the last one), and the
owner stops the model once the log says the set is empty: when its own last
reader leaves, and after each token it logs while its readers are all
elsewhere (so the model runs at most one step for nobody, wherever the last
reader was).  A reader leaving one process never ends another's.

Continuation (``TokenStreams(takeover="continue")``): the stream's request
is kept in its meta (``request_to_meta``) and the owner holds the lease from
creation on, so a lease nobody holds while the stream is still generating
means its owner is gone.  A follower that sees that takes the lease
(``take_over``: only a generating stream, atomically, so one process wins),
reads the logged prefix, passes on what its reader has not had, and calls
the factory again with the same request plus ``prefix`` (the logged parts:
text as ``str``, the others as ``tokenwire.core.parts`` objects) and
``start``; from
then on it is the owner: the new iterator's tokens are logged from
``start`` on, fenced by the lease as the first owner's were, so each index
is logged once.  A token the dead owner generated but never logged is
generated again; nothing logged is.  A prefix that ends inside a tool
call, or after one that awaits its result (``parts.continuable``), or after
the answer's finish is never continued by guess (a partial tool call cannot
be continued through chat completions): the stream ends ``owner lost``,
every logged part kept for its readers.  A shutdown hands such a stream off
(``shut_down``): the lease is released without marking the stream stopped and
the readers' connections end without ``done``, so they reconnect elsewhere
and a follower there continues at once.  Every log call is awaited
(``Await``): nothing blocks the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..core.channel import Policy
from ..core.effects import Await, Effect, Process, TokenItem
from ..core.endings import CANCELLED, LOST, OWNER_LOST, PREFIX_TRIMMED, STOPPED, EarlyEnd, ending_state, failed
from ..core.parts import continuable, decode, kind_of
from ..core.sources import Fed, OnDisconnect, Source
from ..core.stream import Stream
from ..core.tokenlog import LogError, LogGap, StreamLost, StreamState, TokenLog, UnknownStream
from ..models import MAX_MODEL_TOKENS, ModelFactory, ModelParts, StreamRequest
from ..models.kept import REQUEST_KEY, request_from_meta, request_to_meta
from ..redislog.presence import ignored
from ..redislog.streams import AwaitedReads, aio_of, followed, passed_on
from .model_start import open_iterator
from .model_stream import ModelRun, logger

if TYPE_CHECKING:
    from ..redislog.aio import AsyncRedisLog

__all__ = ["META", "NAME_KEY", "REQUEST_KEY", "Continuation", "SharedModel", "attach_model_stream", "is_model_meta",
           "request_from_meta", "request_to_meta", "shared_model_stream"]

# What a model stream's meta says in the log (a canned stream's carries its spec instead).
META = {"model": "asgi"}
# The meta key of the name of the model that made the stream: only a process with that model continues it.
NAME_KEY = "name"

# A continuation: the factory to call again, and the stream's request as it was first made.
Continuation = tuple[ModelFactory, StreamRequest]


def is_model_meta(meta: Any) -> bool:
    """True if a log's meta is a model stream's (made by ``tokenwire.asgi`` with your own model)."""
    return isinstance(meta, dict) and meta.get("model") == META["model"]


class Elsewhere(Enum):
    """What a follower learns of the owner when the log stops growing, when the stream has not ended."""

    GENERATING = "generating"     # the owner is alive (or another follower took it over first)
    TAKEN = "taken"               # the owner is gone and this process took the lease: it continues the model


class SharedModel(Source):
    """Your model as a stream's source on a shared log: the owner (with ``iterator``) or a follower (without).

    ``continuation``: what a follower calls to continue the model of a dead
    owner (None: it ends the stream ``owner lost`` instead).  ``headers``: the
    request's (see ``ModelRun``).
    """

    length = MAX_MODEL_TOKENS

    def __init__(self, iterator: AsyncIterator[str] | None, aio: AsyncRedisLog, *,
                 continuation: Continuation | None = None, headers: Mapping[str, str] | None = None) -> None:
        self.run = ModelRun(iterator, headers)
        self.aio = aio
        self.continuation = continuation
        self._orphaned_at: float | None = None     # when a follower first saw no owner holding the lease
        self._taken_length = 0
        self.handing_off = False                  # stopped by a shutdown, to be continued elsewhere
        self._present = False                     # this process's reader presence is in the log (cancel only)

    def at_creation(self, stream: Fed) -> Process | None:
        """The owner's producer, to run from creation on (``Registry.adopt`` spawns it); None for a follower."""
        return None if self._following() else self.produce(stream, 0)

    def _following(self) -> bool:
        """No iterator to pull here (never had one, or a log error stopped its producer): follow the log.

        An iterator released unread (a stop before its producer ran) is not
        followed: the stream ends as the stop said.
        """
        return self.run.iterator is None and not self.run.released

    # -- stopping ------------------------------------------------------------------------------
    def _stop(self, stream: Fed, reason: EarlyEnd) -> None:
        """``ModelRun.stop``; at a shutdown, a model another process may continue is handed off instead.

        Its lease is let go without marking the stream stopped, and its readers'
        connections end without ``done``: they reconnect elsewhere, where a
        follower takes the free lease at once and continues the model.
        """
        self.handing_off = (reason == CANCELLED and self.continuation is not None and stream.producer_running
                            and stream.ending is None)
        self.run.stop(stream, reason)

    def shut_down(self, stream: Fed) -> None:
        self._stop(stream, CANCELLED)

    def stop_generating(self, stream: Fed) -> None:
        """Stop for good, here: the log says so already (``AsyncRedisLog.stop``), and the owner may be elsewhere."""
        self._stop(stream, STOPPED)

    def release(self, stream: Fed) -> None:
        self.run.release(stream)

    # -- readers here and on other processes (``cancel``) ---------------------------------------
    def joined(self, stream: Fed) -> None:
        """The first reader attached here puts this process's presence in the log."""
        if stream.on_disconnect is OnDisconnect.CANCEL and not self._present:
            self._present = self._presence(self.aio.attend, stream.stream_id) is not None

    def left(self, stream: Fed, cancel: bool) -> None:
        """The last reader here left: a cancel stops the model only once no process has a reader attached.

        This process's presence leaves the log; the owner cancels when the log
        says no reader is left anywhere (``_deserted``).  ``cancel=False`` (the
        reader is back at once): the presence is no longer renewed, and runs
        out a lease later unless a reader attaches here again.
        """
        if not self._present:
            return
        self._present = False
        if not cancel:
            with contextlib.suppress(RuntimeError):      # no running loop: nothing is renewed there either
                self.aio.writer.renewal.unattend(stream.stream_id)
            return
        deserted = self._presence(self.aio.leave, stream.stream_id)
        if deserted is not None and self.run.iterator is not None:
            deserted.add_done_callback(functools.partial(self._deserted, stream))

    def _presence(self, call: Callable[[str], asyncio.Future[Any]], stream_id: str) -> asyncio.Future[Any] | None:
        """Make a presence call nobody waits for (None without a running loop: the entry runs out by itself)."""
        try:
            future = call(stream_id)
        except RuntimeError:
            return None
        future.add_done_callback(ignored)
        return future

    def _deserted(self, stream: Fed, done: asyncio.Future[Any]) -> None:
        """The log says no process has a reader attached: the owner stops the model (the step under way too)."""
        if done.cancelled() or done.exception() is not None or not done.result():
            return
        if stream.unread() and stream.producer_running and not stream.cancelled:
            stream.cancel()
            self.run.cancel_step()

    # -- ModelLog: the owner's log calls, awaited -------------------------------------------------
    def append(self, stream: Fed, index: int, token: str) -> Process:
        yield Await(self.aio.append_future(stream.stream_id, index, token))
        if stream.on_disconnect is OnDisconnect.CANCEL and stream.unread():
            watch = self._presence(self.aio.deserted, stream.stream_id)     # every reader is elsewhere: any left?
            if watch is not None:
                watch.add_done_callback(functools.partial(self._deserted, stream))

    def end(self, stream: Fed, total: int, ending: EarlyEnd | None) -> Process:
        if self.handing_off and ending == CANCELLED:
            try:
                yield Await(self.aio.release(stream.stream_id))              # free for a continuation at once
            except LogError:
                pass                                                        # it expires by itself
            finally:
                stream.abandon()
            return
        try:       # the state and a failure's message in one call; it stops the lease's renewal too
            yield Await(self.aio.set_state(stream.stream_id, ending_state(ending), None if ending is None
                                           else ending.error))
        finally:
            stream.ended(total, ending)

    # -- the producer ----------------------------------------------------------------------------
    def produce(self, stream: Fed, start: int) -> Process:
        if self._following():
            yield from self._follow(stream, start)
            return
        sid = stream.stream_id
        try:
            if start == self.run.position and self.run.iterator is not None:
                claim = yield Await(self.aio.claim(sid))       # the lease says "its owner is alive"
                if claim.stopped:
                    self._stop(stream, STOPPED)            # stopped before it began: the producer ends at once
                else:
                    self.aio.watch_stop(sid, lambda: self._stop(stream, STOPPED))
        except StreamLost:
            yield from self.run.close(stream)
            yield from self.end(stream, start, LOST)
            return
        except LogError as exc:
            stream.abandon(exc)               # the reader ends without `done`; it resumes once the log is back
            yield from self.run.close(stream)
            raise
        try:
            yield from self.run.pull(stream, start, self)
        finally:
            self.aio.disown(sid)

    # -- a follower on another process --------------------------------------------------------
    def _follow(self, stream: Fed, start: int) -> Process:
        cursor, sid = start - 1, stream.stream_id
        try:
            while True:
                got = yield from followed(self.aio, stream, cursor)
                if got > cursor:
                    self._orphaned_at, cursor = None, got
                    continue
                outcome = yield from self._ended_elsewhere(sid)
                if outcome is Elsewhere.TAKEN:
                    yield from self._continue(stream, cursor)
                    return
                if outcome is not Elsewhere.GENERATING:
                    length = yield Await(self.aio.length(sid, patient=True))
                    if length - 1 > cursor:
                        continue              # the last tokens landed as the owner ended: pass them on first
                    stream.ended(length, outcome)
                    return
        except StreamLost:
            stream.ended(cursor + 1, LOST)      # what this process passed on is all there is
        except LogError as exc:
            stream.abandon(exc)
            raise

    def _ended_elsewhere(self, sid: str) -> Generator[Effect, Any, EarlyEnd | Elsewhere | None]:
        """How the owner ended the stream (None: done, to the end), or what the follower learned of the owner."""
        state, failure = yield Await(self.aio.ending(sid, patient=True))
        if state is StreamState.DONE:
            return None
        if state is StreamState.STOPPED:
            return STOPPED
        if state is StreamState.CANCELLED:         # as its owner's readers were told: failed, or cancelled
            return CANCELLED if failure is None else failed(failure)
        if self.continuation is not None:          # the owner held the lease from creation: none now, it is gone
            claim = yield Await(self.aio.take_over(sid))
            if not claim.owned:
                return Elsewhere.GENERATING     # alive, or another follower took it over first
            self._taken_length = claim.length
            return Elsewhere.TAKEN
        if (yield Await(self.aio.owner(sid, patient=True))) is not None:
            self._orphaned_at = None
            return Elsewhere.GENERATING
        now = time.monotonic()
        if self._orphaned_at is None or now - self._orphaned_at < self.aio.log.lease_ms / 1000:
            self._orphaned_at = self._orphaned_at or now     # no owner now: dead only if none for a whole lease
            return Elsewhere.GENERATING
        yield Await(self.aio.set_state(sid, StreamState.CANCELLED))    # its owner died
        return OWNER_LOST

    # -- a follower continuing the model of a dead owner ---------------------------------------
    def _continue(self, stream: Fed, cursor: int) -> Process:
        """This process holds the lease now: pass on the logged rest, then run the model again from there."""
        assert self.continuation is not None
        factory, request = self.continuation
        start, sid = self._taken_length, stream.stream_id
        try:
            try:
                prefix = tuple((yield Await(self.aio.read_after(sid, -1, start, patient=True))))
            except LogGap as exc:
                yield from self._cannot_continue(stream, cursor, start, exc)
                return
            for index in range(cursor + 1, start):
                yield stream.pass_on(TokenItem(index, prefix[index]))
            if not _continuable(prefix):           # inside a tool call, or after one awaiting its result
                logger.warning("tokenwire stream %s: not continued: its logged answer ends inside a tool call, "
                               "or after one that awaits its result, or after its finish", sid)
                yield from self.end(stream, start, OWNER_LOST)
                return
            parts = tuple(decode(entry) for entry in prefix)
            self.run.position, self.run.headers, self.run.parts = start, request.headers, ModelParts(parts)
            self.aio.watch_stop(sid, lambda: self._stop(stream, STOPPED))
            try:
                self.run.iterator = yield Await(open_iterator(factory, dataclasses.replace(request, prefix=parts,
                                                                                         start=start)))
            except Exception as exc:  # noqa: BLE001 - the factory's own error, named to the reader
                yield from self.run.failing(stream, start, f"the model factory raised {type(exc).__name__}", self,
                                            exc)
                return
            yield from self.run.pull(stream, start, self)
        finally:
            self.aio.disown(sid)

    def _cannot_continue(self, stream: Fed, cursor: int, start: int, gap: LogGap) -> Process:
        """The log trimmed the prefix (a ``maxlen`` below the answer): pass on what it still holds, then end.

        The model cannot be called with part of its answer, so the stream ends
        with the early-stop ``done`` (``"prefix trimmed"``), for every process.
        """
        logger.warning("tokenwire stream %s: cannot continue the model: %s (a log maxlen below the answer's "
                       "length)", stream.stream_id, gap)
        try:
            cursor = yield from passed_on(self.aio, stream, cursor, start - cursor - 1)
        except LogGap:
            pass                                 # this reader's next token is trimmed too: it ends where it is
        yield from self.end(stream, cursor + 1, PREFIX_TRIMMED)


def _continuable(entries: tuple[str, ...]) -> bool:
    """A model may write on after ``entries``: no tool call open or awaiting its result (``parts.continuable``),
    and no finish logged (the answer was whole; only its ending was lost)."""
    return continuable(list(entries)) and not any(kind_of(entry) == "finish" for entry in entries)


def shared_model_stream(stream_id: str, iterator: AsyncIterator[str] | None, log: TokenLog, *, policy: Policy,
                        capacity: int, on_disconnect: OnDisconnect, continuation: Continuation | None = None,
                        headers: Mapping[str, str] | None = None) -> Stream:
    """A model stream already in the shared ``log``: owned here (``iterator``) or followed (None)."""
    aio = aio_of(log)
    source = SharedModel(iterator, aio, continuation=continuation, headers=headers)
    return Stream(stream_id, source, log, reads=AwaitedReads(aio), attach="checked", policy=policy,
                  capacity=capacity, on_disconnect=on_disconnect, keep_trace=False)


async def attach_model_stream(stream_id: str, log: TokenLog, *, policy: Policy, capacity: int,
                              on_disconnect: OnDisconnect, continuation: Continuation | None = None) -> Stream:
    """Rebuild a model stream another process created in the shared ``log`` (a follower); raises ``UnknownStream``."""
    if not is_model_meta(await aio_of(log).meta(stream_id)):
        raise UnknownStream(stream_id)
    return shared_model_stream(stream_id, None, log, policy=policy, capacity=capacity, on_disconnect=on_disconnect,
                               continuation=continuation)
