"""A stream whose tokens come from your own model: an async iterator of ``str``, pulled one token at a time.

How this works: ``ModelTokens`` is a ``Stream``'s source whose producer
(``ModelRun.pull``), instead of paying a canned model's step with ``Sleep``,
awaits the iterator's next token (an ``Await`` effect, so the event loop goes on meanwhile), logs it
under the next index and ``Put``s it to the reader, as the canned producer
does.  The length is not known until the iterator ends, so until then
``total`` is ``MAX_MODEL_TOKENS`` (the most a stream's log keeps); when the
model stops, for whatever reason, ``total`` becomes the number of tokens
logged, and every reader that reaches the end gets the last frame saying
how it ended (``Stream.closing_frame``):

- the iterator is exhausted: ``done``, as for the canned answer;
- it was stopped early (``cancel``, and the last reader left; the server
  shutting down; an owner that died on a shared log; a shared log that
  lost the stream's tokens, ``"lost"``): ``done`` with
  ``"stopped_early": true`` and the reason;
- the model raised, or yielded a token that is not a ``str`` UTF-8 can
  encode (``token_problem``, checked before the token enters any log): a
  ``failed`` event naming the exception type (never its traceback or
  message) or what is wrong with the token, logged once on the server.

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
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Protocol

from ..core.effects import Await, Process, TokenItem
from ..core.endings import CANCELLED, LOST, OWNER_LOST, STOPPED, EarlyEnd, ending_state, failed
from ..core.parts import encode, is_part
from ..core.sources import Fed, Source
from ..core.tokenlog import DEFAULT_MAX_TOKENS, LogError, StreamLost, StreamState, StreamStopped
from ..endpoints.access import shown, told
from ..endpoints.decisions import ChatRequest, OpenAIRequest

__all__ = ["MAX_MODEL_TOKENS", "ModelFactory", "ModelLog", "ModelRun", "ModelTokens", "StreamRequest", "token_problem"]

# The most tokens one model stream may yield: what a stream's token log keeps
# (DEFAULT_MAX_TOKENS), far past any LLM answer; a model that goes on past
# it ends with `failed` rather than losing the start of its answer.
MAX_MODEL_TOKENS = DEFAULT_MAX_TOKENS
# A bad token is quoted in the error up to this many characters.
_QUOTE_CHARS = 40

logger = logging.getLogger("tokenwire.asgi")


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """What the model factory is called with for a new stream.

    stream_id: the new stream's id; params: the query's parameters (without
    ``cut_after`` and ``last_event_id``, which the app reads itself); body:
    the ``POST /streams`` body (empty for ``GET /stream``); client: the
    client's address.  prefix and start: empty and 0 for a new stream; for a
    continuation (``TokenStreams(takeover="continue")``: the process that
    generated the stream died), the tokens logged so far and the index the
    new iterator's first token gets (``start == len(prefix)``): continue the
    answer after ``"".join(prefix)``, for instance by sending it back as the
    assistant's partial turn.  chat: for ``POST /chat``, its body read (the
    chat id, the messages, the trigger, the whole JSON object; ``params`` is
    then empty and ``body`` the raw JSON); None for the other routes.
    headers: the creating request's headers, lower-case names (a name sent
    twice: its values joined by ``", "``); on a continuation, those the log
    kept (all but ``keep_out_of_log``'s).  principal: who made the stream,
    as the app's ``authorize`` hook named them (None: the app has no hook).
    openai: for ``POST /v1/chat/completions`` and ``POST /v1/responses``,
    the body read (``api``, ``model``, the ``messages`` or the ``input``,
    the whole JSON object; ``params`` is then empty); None for the others.
    """

    stream_id: str
    params: Mapping[str, str]
    body: bytes
    client: str
    prefix: tuple[str, ...] = ()
    start: int = 0
    chat: ChatRequest | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    principal: str | None = None
    openai: OpenAIRequest | None = None

    def __repr__(self) -> str:          # a model that logs its request logs no credentials
        values = {one.name: getattr(self, one.name) for one in fields(self)}
        values["headers"] = shown(self.headers)
        return f"StreamRequest({', '.join(f'{name}={value!r}' for name, value in values.items())})"

    def __post_init__(self) -> None:
        if self.start != len(self.prefix):
            raise ValueError(f"start must be len(prefix) ({len(self.prefix)}), got {self.start!r}")


# A factory returns the tokens, sync or async, or an awaitable of them (``model_start`` calls it).
Tokens = AsyncIterable[str] | Iterable[str]
ModelFactory = Callable[[StreamRequest], Tokens | Awaitable[Tokens]]


def token_problem(token: object, index: int) -> str | None:
    """What is wrong with ``token``, the model's token ``index``, as the ``failed`` event says it; None if nothing.

    A token must be a ``str`` that encodes to UTF-8 (the wire's encoding; a
    lone surrogate such as ``"\\ud800"`` has no encoding).  Every token is
    checked here before it enters a log, the memory one or a shared one.
    """
    if not isinstance(token, str):
        return f"the model yielded {_quote(token)} ({type(token).__name__}) as token {index}; a token must be a str"
    if token.isascii():
        return None
    try:
        token.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"the model yielded a str that is not valid UTF-8 (a lone surrogate at position {exc.start}) "
                f"as token {index}")
    return None


def _quote(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "..."


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
                    yield from self.failing(stream, index, f"the model raised {type(exc).__name__}", log, exc)
                    break
                finally:
                    self.pending = None
                if token is _END:
                    yield from log.end(stream, index, None)
                    break
                if is_part(token):                 # a typed part is one log entry (core.parts' codec)
                    token = encode(token)
                problem = token_problem(token, index)
                if problem is None and index >= MAX_MODEL_TOKENS:
                    problem = f"the model yielded more than {MAX_MODEL_TOKENS} tokens, the most a stream keeps"
                if problem is not None:
                    yield from self.failing(stream, index, problem, log)
                    break
                try:
                    yield from log.append(stream, index, str(token))
                except StreamStopped:              # stopped on another process: the log refused the token
                    self.stop_reason = STOPPED
                    yield from log.end(stream, index, STOPPED)
                    break
                self.position = index + 1
                yield from stream.pass_on(TokenItem(index, str(token)))
                index += 1
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
        """The model failed after ``total`` tokens: logged once here (no credentials), ``failed`` for readers."""
        told_exc = "" if exc is None else "\n" + told(exc, self.headers)
        logger.error("tokenwire stream %s: %s%s", stream.stream_id, message, told_exc)
        yield from log.end(stream, total, failed(message))

    def close(self, stream: Fed) -> Process:
        """Close the iterator (awaited), if it is still open."""
        iterator, self.iterator = self.iterator, None
        if iterator is not None:
            yield Await(_aclose(stream.stream_id, iterator))


class ModelTokens(Source):
    """Your model as a stream's source on a log in memory: ``iterator``, an async iterator of ``str``.

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
