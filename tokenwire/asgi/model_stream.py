"""A stream whose tokens come from your own model: an async iterator of ``str``, pulled one token at a time.

How this works: ``ModelStream`` is a core ``Stream`` whose producer, instead
of paying a canned model's step with ``Sleep``, awaits the iterator's next
token (an ``Await`` effect, so the event loop goes on meanwhile), logs it
under the next index and ``Put``s it to the reader, as the canned producer
does.  The length is not known until the iterator ends, so until then
``total`` is ``MAX_MODEL_TOKENS`` (the most a stream's log keeps); when the
model stops, for whatever reason, ``total`` becomes the number of tokens
logged, and every reader that reaches the end gets the last frame saying
how it ended (``closing_frame``):

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
for nobody.  Whatever the ending, the iterator is closed once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..core.channel import BoundedChannel, Policy
from ..core.effects import Await, Effect, Process, Put, TokenItem
from ..core.frames import DEFAULT_RETRY_MS, failed_frame
from ..core.model import Model, Steps, TimingModel
from ..core.stream import LOST, STOPPED_REASON, OnDisconnect, Stream
from ..core.tokenlog import DEFAULT_MAX_TOKENS, LogError, StreamLost, StreamState, StreamStopped, TokenLog
from ..endpoints.access import shown, told
from ..endpoints.decisions import ChatRequest, OpenAIRequest

__all__ = ["MAX_MODEL_TOKENS", "ModelFactory", "ModelStream", "StreamRequest", "token_problem"]

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


@dataclass(frozen=True, slots=True)
class EarlyEnd:
    """Why a model stream ended before its model did: ``reason``, and the ``failed`` event's message if it failed."""

    reason: str
    error: str | None = None


CANCELLED = EarlyEnd("cancelled")
OWNER_LOST = EarlyEnd("owner lost")
# A shared log lost the stream's tokens (Redis evicted them): the model is never asked again.
LOST_TOKENS = EarlyEnd(LOST.reason)

# Asked to stop (``POST /streams/<id>/stop``, on any process), or stopped for a reason another process cannot know.
STOPPED = EarlyEnd(STOPPED_REASON)


def ending_state(ending: EarlyEnd | None) -> StreamState:
    """The log's state for a model that ended so: done, stopped (asked to), or cancelled (any other early end)."""
    if ending is None:
        return StreamState.DONE
    return StreamState.STOPPED if ending is STOPPED else StreamState.CANCELLED


class _OpenLength(Model):
    """The core's model slot for a model whose length is not known: only its length cap is read."""

    def __init__(self, cap: int) -> None:     # no tokens, no timing: the producer never asks for them
        self.tokens, self.timing, self.steps = (), TimingModel(), Steps(0)
        self._cap = cap

    def __len__(self) -> int:
        return self._cap


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


class ModelStream(Stream):
    """A ``Stream`` fed by ``source``, an async iterator of ``str`` (None: none here, e.g. joined from elsewhere).

    ``ending`` is None while the model runs and after it ran out; an
    ``EarlyEnd`` once it was stopped early or failed.  ``policy``,
    ``capacity``, ``on_disconnect``, ``retry_ms``, ``meta`` and ``attach``
    are ``Stream``'s.  ``headers``: the request's, whose credentials a
    failing model's logged traceback leaves out (``access.told``).
    """

    def __init__(self, stream_id: str, source: AsyncIterator[str] | None, log: TokenLog, *,
                 policy: Policy | str = Policy.BLOCK, capacity: int = 4,
                 on_disconnect: OnDisconnect | str = OnDisconnect.DETACH, retry_ms: int = DEFAULT_RETRY_MS,
                 meta: Mapping[str, Any] | None = None, attach: bool | str = False,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(stream_id, _OpenLength(MAX_MODEL_TOKENS), log, policy=policy, capacity=capacity,
                         on_disconnect=on_disconnect, retry_ms=retry_ms, meta=meta, attach=attach,
                         keep_trace=False)
        self.headers: Mapping[str, str] = headers or {}
        self.source = source
        self.position = 0                    # the index the source yields next
        self.ending: EarlyEnd | None = None
        self._pending: asyncio.Future[object] | None = None
        self.released = False                # the iterator was closed before any producer ran it
        self.stop_reason = CANCELLED         # how a stop ends it: cancelled (a reader left, a shutdown) or stopped

    # -- stopping ------------------------------------------------------------
    def disconnect(self, channel: BoundedChannel[TokenItem], *, cancel: bool = True) -> None:
        """As ``Stream.disconnect``; with ``cancel`` and nobody left, the token being generated is abandoned."""
        super().disconnect(channel, cancel=cancel)
        if self.cancelled and self._pending is not None:
            self._pending.cancel()

    def stop(self, reason: EarlyEnd = CANCELLED) -> None:
        """Stop the model now (the server is shutting down; ``STOPPED``: asked to): readers get the early ``done``.

        Right for every model stream, whatever its state: a running producer
        stops within one token and closes the iterator; an iterator no producer
        has started is closed here (``release``); a finished one is left alone.
        """
        if not self.cancelled or reason is STOPPED:
            self.stop_reason = reason
        self.cancelled = True
        if self._pending is not None:
            self._pending.cancel()
        self.release()

    def stop_generating(self) -> None:
        """Stop for good (``POST /streams/<id>/stop``): ``stop`` with the reason ``stopped``, in the log too."""
        self.stopping = True
        if self.ending is None and (self.producer_running or self.source is not None):
            self.log.set_state(self.stream_id, StreamState.STOPPED)      # still running, or never run
        self.stop(STOPPED)

    def release(self) -> None:
        """Close the iterator now if no producer holds it (never read, or forgotten unread); at most once.

        A no-op while a producer runs (it closes the iterator when it ends) and
        once the iterator is closed.  The ``aclose()`` runs as a task on the
        running loop.  A reader that comes later gets the early ``done``
        (``"reason": "cancelled"``).
        """
        if self.producer_running or self.source is None:
            return
        source, self.source = self.source, None
        self.released = True
        _close_soon(self.stream_id, source)

    # -- the producer --------------------------------------------------------
    def produce(self, start: int) -> Process:
        """Pull tokens from the source from ``start`` on, logging each before it is sent; see the module."""
        source = self.source
        if source is None or start != self.position:      # a model cannot resume at `start`
            yield from self._ending(start, OWNER_LOST if source is None and not self.released else self.stop_reason)
            yield from self._close_source()
            return
        index = start
        try:
            while True:
                if self.cancelled:
                    yield from self._ending(index, self.stop_reason)
                    break
                self._pending = task = asyncio.ensure_future(_next_token(source))
                try:
                    token = yield Await(task)
                except asyncio.CancelledError:
                    yield from self._ending(index, self.stop_reason)
                    break
                except Exception as exc:  # noqa: BLE001 - the model's own error, reported to the reader by name
                    yield from self._failing(index, f"the model raised {type(exc).__name__}", exc)
                    break
                finally:
                    self._pending = None
                if token is _END:
                    yield from self._ending(index, None)
                    break
                problem = token_problem(token, index)
                if problem is not None:
                    yield from self._failing(index, problem)
                    break
                if index >= self.total:
                    yield from self._failing(index, f"the model yielded more than {self.total} tokens, the most a "
                                                    f"stream keeps")
                    break
                try:
                    item = yield from self._logged(index, str(token))
                except StreamStopped:              # stopped on another process: the log refused the token
                    self.stop_reason = STOPPED
                    yield from self._ending(index, STOPPED)
                    break
                yield Put(self, item)
                index += 1
        except StreamLost:                   # the log lost what readers hold: never continued, said so
            self._pending = None
            yield from self._ending(index, LOST_TOKENS)
        except LogError:
            self._lost()
            self._pending = None
            yield from self._close_source()
            raise
        yield from self._close_source()

    # Steps a log that must be awaited (Redis, ``shared_model``) overrides: the
    # generator returns before it yields, so here they are plain calls.
    def _logged(self, index: int, token: str) -> Generator[Effect, Any, TokenItem]:
        """Log ``token`` at ``index`` and make its item (rung to the followers)."""
        self.log.append(self.stream_id, index, token)
        return self._made(index, token)
        yield  # unreachable: it makes this a generator

    def _ending(self, total: int, ending: EarlyEnd | None) -> Process:
        """Record how the model ended in the log, then close every reader's channel."""
        self.log.set_state(self.stream_id, ending_state(ending))
        self._close(total, ending)
        return
        yield  # unreachable, as in _logged

    def _made(self, index: int, token: str) -> TokenItem:
        item = TokenItem(index, token)
        self.position = index + 1
        self.ring(item)
        return item

    def _close(self, total: int, ending: EarlyEnd | None) -> None:
        """The model is over after ``total`` tokens: every reader drains, then gets the closing frame."""
        self.total, self.ending = total, ending
        self.producer_running = False
        for channel in (self.channel, *self.followers):
            if channel is not None:
                channel.close()
        self.cond.notify_all()

    def _failing(self, total: int, message: str, exc: BaseException | None = None) -> Process:
        told_exc = "" if exc is None else "\n" + told(exc, self.headers)
        logger.error("tokenwire stream %s: %s%s", self.stream_id, message, told_exc)
        yield from self._ending(total, EarlyEnd("failed", message))

    def _close_source(self) -> Process:
        source, self.source = self.source, None
        if source is not None:
            yield Await(_aclose(self.stream_id, source))

    # -- the last frame --------------------------------------------------------
    def closing_frame(self, delivered_from: int, dropped: int) -> bytes:
        """``done`` for a model that ran out; ``done`` with ``stopped_early``, or ``failed``, otherwise."""
        if self.ending is not None and self.ending.error is not None:
            return failed_frame(self.ending.error, self.total)
        return super().closing_frame(delivered_from, dropped)
