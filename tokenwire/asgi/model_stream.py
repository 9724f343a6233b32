"""A stream whose parts come from your own model: an async iterator, pulled one yield at a time.

How this works: ``ModelTokens`` is a ``Stream``'s source whose producer
(``ModelRun.pull``), instead of paying a canned model's step with ``Sleep``,
awaits the iterator's next yield (an ``Await`` effect, so the event loop goes
on meanwhile), makes it log entries (``models.ModelParts``: a ``str`` is
text, as it always was; tokenwire's parts and the openai, anthropic and
LangChain clients' stream objects are parts, each checked where it stands),
logs each under the next index and ``Put``s it to the reader, as the canned
producer does.  The length is not known until the iterator ends, so until then
``total`` is ``MAX_MODEL_TOKENS`` (the most a stream's log keeps); when the
model stops, for whatever reason, ``total`` becomes the number of tokens
logged, and every reader that reaches the end gets the last frame saying
how it ended (``Stream.closing_frame``):

- the iterator is exhausted: ``done``, as for the canned answer;
- it was stopped early (``cancel``, and the last reader left; the server
  shutting down; an owner that died on a shared log; a shared log that
  lost the stream's tokens, ``"lost"``): ``done`` with
  ``"stopped_early": true`` and the reason;
- the model raised, or yielded something that is no part, or a part that
  may not stand where it does (a text UTF-8 cannot encode, an argument
  delta for a call never started, an object of no known client, an entry
  past ``MAX_ENTRY_BYTES`` or one that takes the answer past
  ``MAX_ANSWER_BYTES``: checked before it enters any log), or more than
  ``MAX_MODEL_TOKENS`` parts: a ``failed`` event naming the exception type
  (never its traceback or message) or the part, its index and what is wrong
  with it, logged once on the server; every part before it stays.

A model cannot be restarted at index k, so a stopped iterator is never asked
again: a reconnect replays what was logged and gets the early ``done``.
With ``detach`` (the default here) the producer does not stop when the
reader leaves: it keeps logging, so the resume gets everything.  With
``cancel`` the token being generated is abandoned (its task is cancelled)
and the iterator closed with ``aclose``: the model runs at most one step
for nobody.  Whatever the ending, the iterator is closed once.  The same
model on a shared log (Redis) is ``shared_model.SharedModel``: the pull is
the same ``ModelRun``, its log calls (``ModelLog``) awaited.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from ..core.effects import Await, Process, TokenItem
from ..core.endings import CANCELLED, LOST, OWNER_LOST, STOPPED, EarlyEnd, ending_state, failed, raised
from ..core.parts import PartError
from ..core.sources import Fed, Source
from ..core.tokenlog import LogError, StreamLost, StreamState, StreamStopped
from ..endpoints.access import redacted, told
from ..models import MAX_MODEL_TOKENS, ModelFactory, ModelFailure, ModelParts, StreamRequest, token_problem

__all__ = ["MAX_MODEL_TOKENS", "ModelFactory", "ModelLog", "ModelRun", "ModelTokens", "StreamRequest", "token_problem"]

# A bad yield is quoted in the error up to this many characters.
_QUOTE_CHARS = 40

logger = logging.getLogger("tokenwire.asgi")


def _quote(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "..."


def _raised(exc: Exception, index: int) -> str:
    """What the ``failed`` event says of the model's exception: its type (never its message, which may hold a
    secret), and for a part the model could not make (``PartError``, tokenwire's own words) what was wrong."""
    if isinstance(exc, PartError):
        return f"part {index}: the model raised PartError: {exc}"
    return raised(exc)


class _End:
    def __repr__(self) -> str:
        return "END"


_END = _End()


async def _next_token(source: AsyncIterator[str]) -> object:
    try:
        return await source.__anext__()
    except StopAsyncIteration:
        return _END


# The closing tasks of iterators released outside a producer, held until they end (the loop keeps weak references).
_closing: set[asyncio.Task[None]] = set()


async def _aclose(stream_id: str, source: AsyncIterator[str]) -> None:
    """Close ``source`` with its ``aclose()``, if it has one; what that raises is logged, never raised."""
    aclose = getattr(source, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception as exc:  # noqa: BLE001 - closing is best effort; the stream has ended either way
        logger.warning("tokenwire stream %s: closing the model raised %s", stream_id, type(exc).__name__,
                       exc_info=exc)


def _close_soon(stream_id: str, source: AsyncIterator[str]) -> None:
    """Close ``source`` as a task on the running loop; with none, as far as it goes without awaiting anything."""
    closing = _aclose(stream_id, source)
    try:
        task = asyncio.get_running_loop().create_task(closing)
    except RuntimeError:                      # no loop running here (a synchronous caller)
        try:
            closing.send(None)
        except StopIteration:
            return
        closing.close()
        logger.warning("tokenwire stream %s: the model could not be closed: its aclose() waits and no event "
                       "loop is running", stream_id)
        return
    _closing.add(task)
    task.add_done_callback(_closing.discard)


class ModelLog(Protocol):
    """How a model's tokens and its ending are logged, as steps of the producer (a shared log's are awaited)."""

    def append(self, stream: Fed, index: int, token: str) -> Process: ...
    def end(self, stream: Fed, total: int, ending: EarlyEnd | None) -> Process: ...


class ModelRun:
    """One model iterator pulled a token at a time by a stream's producer: what stops it, what closes it.

    ``iterator``: the model's (None: none here yet, e.g. a follower's, or
    closed).  ``position``: the index it yields next.  ``stop_reason``: how a
    stop ends it (cancelled: a reader left, a shutdown; or stopped: asked
    to).  ``headers``: the request's, whose credentials a failing model's
    logged traceback leaves out (``access.told``).
    """

    def __init__(self, iterator: AsyncIterator[str] | None, headers: Mapping[str, str] | None = None) -> None:
        self.iterator = iterator
        self.headers: Mapping[str, str] = headers or {}
        self.position = 0
        self.pending: asyncio.Future[object] | None = None    # the step under way
        self.released = False                # the iterator was closed before any producer ran it
        self.stop_reason = CANCELLED
        self.parts = ModelParts()             # what the model yields, made checked log entries

    def stop(self, stream: Fed, reason: EarlyEnd = CANCELLED) -> None:
        """Stop the model now (``STOPPED``: asked to; else cancelled): readers get the early ``done``.

        Right whatever the state: a running producer stops within one token
        and closes the iterator; an iterator no producer has started is closed
        here (``release``); a finished one is left alone.
        """
        if not stream.cancelled or reason == STOPPED:
            self.stop_reason = reason
        stream.cancel()
        self.cancel_step()
        self.release(stream)

    def cancel_step(self) -> None:
        """Abandon the token being generated (its task is cancelled), if one is."""
        if self.pending is not None:
            self.pending.cancel()

    def release(self, stream: Fed) -> None:
        """Close the iterator now if no producer holds it (never read, or forgotten unread); at most once.

        A no-op while a producer runs (it closes the iterator when it ends) and
        once the iterator is closed.  The ``aclose()`` runs as a task on the
        running loop.  A reader that comes later gets the early ``done``
        (``"reason": "cancelled"``).
        """
        if stream.producer_running or self.iterator is None:
            return
        iterator, self.iterator = self.iterator, None
        self.released = True
        _close_soon(stream.stream_id, iterator)

    def pull(self, stream: Fed, start: int, log: ModelLog) -> Process:
        """Pull tokens from ``start`` on, logging each (``log``) before it is passed on; see the module."""
        iterator = self.iterator
        if iterator is None or start != self.position:      # a model cannot resume at `start`
            yield from log.end(stream, start, OWNER_LOST if iterator is None and not self.released
                               else self.stop_reason)
            yield from self.close(stream)
            return
        index = start
        try:
            while True:
                if stream.ending is not None:      # ended under the producer: a reader found the log lost it
                    break
                if stream.cancelled:
                    yield from log.end(stream, index, self.stop_reason)
                    break
                self.pending = task = asyncio.ensure_future(_next_token(iterator))
                try:
                    token = yield Await(task)
                except asyncio.CancelledError:
                    yield from log.end(stream, index, self.stop_reason)
                    break
                except Exception as exc:  # noqa: BLE001 - the model's own error, reported to the reader by name
                    yield from self.failing(stream, index, _raised(exc, index), log, exc)
                    break
                finally:
                    self.pending = None
                try:
                    entries = self.parts.close(index) if token is _END else self.parts.entries(token, index)
                except PartError as exc:
                    yield from self.failing(stream, index, str(exc), log)
                    break
                if index + len(entries) > MAX_MODEL_TOKENS:
                    yield from self.failing(stream, index, f"the model yielded more than {MAX_MODEL_TOKENS} "
                                                           f"tokens, the most a stream keeps", log)
                    break
                for entry in entries:
                    try:
                        yield from log.append(stream, index, entry)
                    except StreamStopped:          # stopped on another process: the log refused the part
                        self.stop_reason = STOPPED
                        yield from log.end(stream, index, STOPPED)
                        break
                    self.position = index + 1
                    yield stream.pass_on(TokenItem(index, entry))
                    index += 1
                else:
                    if token is not _END:
                        continue
                    yield from log.end(stream, index, None)
                break
        except StreamLost:                   # the log lost what readers hold: never continued, said so
            self.pending = None
            yield from log.end(stream, index, LOST)
        except LogError as exc:
            stream.abandon(exc)
            self.pending = None
            yield from self.close(stream)
            raise
        yield from self.close(stream)

    def failing(self, stream: Fed, total: int, message: str, log: ModelLog,
                exc: BaseException | None = None) -> Process:
        """The model failed after ``total`` tokens: logged once here (no credentials; a ``ModelFailure`` as one line,
        its message, the rest with its traceback), ``failed`` for readers."""
        if isinstance(exc, ModelFailure):
            told_exc = ": " + redacted(str(exc), self.headers)
        else:
            told_exc = "" if exc is None else "\n" + told(exc, self.headers)
        logger.error("tokenwire stream %s: %s%s", stream.stream_id, message, told_exc)
        yield from log.end(stream, total, failed(message))

    def close(self, stream: Fed) -> Process:
        """Close the iterator (awaited), if it is still open."""
        iterator, self.iterator = self.iterator, None
        if iterator is not None:
            yield Await(_aclose(stream.stream_id, iterator))


class ModelTokens(Source):
    """Your model as a stream's source on a log in memory: ``iterator``, an async iterator of its yields.

    ``headers``: the request's (see ``ModelRun``).  ``run`` is the iterator
    being pulled.  Appends and the ending are plain log calls.
    """

    length = MAX_MODEL_TOKENS

    def __init__(self, iterator: AsyncIterator[str], headers: Mapping[str, str] | None = None) -> None:
        self.run = ModelRun(iterator, headers)

    def produce(self, stream: Fed, start: int) -> Process:
        return self.run.pull(stream, start, self)

    def left(self, stream: Fed, cancel: bool) -> None:
        """As ``Source.left``; a cancel abandons the token being generated too."""
        super().left(stream, cancel)
        if stream.cancelled:
            self.run.cancel_step()

    def stop_generating(self, stream: Fed) -> None:
        """Stop for good: ``ModelRun.stop`` with the reason ``stopped``, in the log too (a finished one stays)."""
        if stream.ending is None and (stream.producer_running or self.run.iterator is not None):
            stream.log.set_state(stream.stream_id, StreamState.STOPPED)      # still running, or never run
        self.run.stop(stream, STOPPED)

    def shut_down(self, stream: Fed) -> None:
        self.run.stop(stream)

    def release(self, stream: Fed) -> None:
        self.run.release(stream)

    # -- ModelLog: plain calls ------------------------------------------------
    def append(self, stream: Fed, index: int, token: str) -> Process:
        stream.log.append(stream.stream_id, index, token)
        return
        yield  # unreachable: it makes this a generator, as an awaited append is

    def end(self, stream: Fed, total: int, ending: EarlyEnd | None) -> Process:
        stream.log.set_state(stream.stream_id, ending_state(ending))
        stream.ended(total, ending)
        return
        yield  # unreachable, as in append
