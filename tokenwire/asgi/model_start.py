"""Your factory called and its model started before the create is answered: its refusals are the client's 400.

How this works: a factory comes in four shapes (a function returning an
iterable of ``str``, sync or async; a generator function; an async generator
function; an async function returning an async iterable).  A generator's body
does not run when it is called: its checks of the request run at its first
step.  So ``open_iterator`` calls the factory, then runs the model's first step
as a task for one turn of the event loop, before the create is answered:

- the step raised (a ``ValueError`` checking the request, say): the
  factory's error, raised here (``ModelMaker.make`` makes it the 400 or
  500), and the model is closed;
- it yielded its first token, ended, or is waiting (an upstream call, its
  thinking): the stream is made, and its producer's first ``__anext__``
  awaits that same task (``_Started``): the first token is neither lost nor
  generated twice, enters the log when the producer takes it, and a model
  still thinking gets the heartbeat as before.  What it raises after its
  first wait is the stream's ``failed`` event, as any later step's.

The step stops at the first wait, never at a timer: which requests get a
400 depends on the code's path, not on the machine's speed.  A sync
iterable's ``next`` runs on the event loop (``_SyncTokens``): it must not
block; a model that waits is an async one.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ..models import StreamRequest
from .model_stream import _aclose, _quote

__all__ = ["open_iterator"]


class _SyncTokens:
    """A sync iterator of tokens as an async one; ``aclose`` closes it (a generator's ``finally`` runs)."""

    def __init__(self, tokens: Iterator[Any]) -> None:
        self._tokens = tokens

    def __aiter__(self) -> _SyncTokens:
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self._tokens)
        except StopIteration:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        close = getattr(self._tokens, "close", None)
        if close is not None:
            close()


class _Started:
    """``tokens`` whose first step already runs as the task ``first``; every later step is its own."""

    def __init__(self, stream_id: str, tokens: AsyncIterator[Any], first: asyncio.Task[Any]) -> None:
        self._stream_id, self._tokens = stream_id, tokens
        self._first: asyncio.Task[Any] | None = first

    def __aiter__(self) -> _Started:
        return self

    async def __anext__(self) -> Any:
        first, self._first = self._first, None
        return await (first if first is not None else self._tokens.__anext__())

    async def aclose(self) -> None:
        """Abandon the first step if nobody took it (its task is cancelled and awaited), then close the model."""
        first, self._first = self._first, None
        if first is not None:
            first.cancel()
            await asyncio.wait({first})
            if not first.cancelled():
                first.exception()            # retrieved: a model nobody read fails nobody
        await _aclose(self._stream_id, self._tokens)


async def _step(tokens: AsyncIterator[Any]) -> Any:
    return await tokens.__anext__()


def _tokens_of(made: Any) -> AsyncIterator[Any]:
    if hasattr(made, "__aiter__"):
        tokens: AsyncIterator[Any] = made.__aiter__()
        return tokens
    if hasattr(made, "__iter__") and not isinstance(made, (str, bytes)):
        return _SyncTokens(iter(made))
    raise TypeError(f"the model factory must return an iterable of str, got {_quote(made)}")


async def open_iterator(factory: Any, request: StreamRequest) -> AsyncIterator[str]:
    """Call ``factory`` (awaiting it if it is async) and start its model; returns the async iterator of tokens.

    Raises what the factory raises, or its model's first step raises before
    it yields or waits; ``TypeError`` when it returns something that is not
    an iterable (a ``str`` is refused too: its tokens would be characters).
    """
    made: Any = factory(request)
    if inspect.isawaitable(made):
        made = await made
    tokens = _tokens_of(made)
    first = asyncio.get_running_loop().create_task(_step(tokens))
    try:
        await asyncio.sleep(0)    # the step runs first: create_task queued it before this task's own wake-up
    except BaseException:
        await _Started(request.stream_id, tokens, first).aclose()
        raise
    if first.done() and not first.cancelled():
        problem = first.exception()
        if problem is not None and not isinstance(problem, StopAsyncIteration):
            await _aclose(request.stream_id, tokens)
            raise problem
    return _Started(request.stream_id, tokens, first)
