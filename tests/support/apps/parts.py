"""What the apps the tests serve with uvicorn share; this module holds no tests.

``model`` (``counting``) yields ``" t<i>"`` for ``i`` from
``request.start`` to ``n - 1`` (the query's ``n``, default 20), each after
``delay_ms`` (default 5), so a continuation picks up at ``start``; every
call of it appends one JSON line to the file ``TOKENWIRE_TEST_CALLS`` names
(``record``: the stream, the pid, ``start``, the ``prefix``, the params, the
model's name, the headers and the principal it was handed), so a test reads
what each process was given even after the process was killed.

``prefix_app(mounts)``: several ASGI apps mounted by path prefix with no
framework (a fresh uvicorn starts in a fraction of a second), one ASGI app: a request under a prefix goes to its
app with the prefix added to ``root_path`` (as Starlette's ``Mount`` does),
any other path is a bare 404, and the lifespan enters every mounted app's
``lifespan()`` at start-up and leaves them at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from tokenwire.asgi import StreamRequest, TokenStreams

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def record(request: StreamRequest, model: str = "model") -> None:
    """Append what ``model``'s factory was handed to the file ``TOKENWIRE_TEST_CALLS`` names (if it is set)."""
    calls_file = os.environ.get("TOKENWIRE_TEST_CALLS")
    if calls_file is None:
        return
    line = json.dumps({"stream_id": request.stream_id, "pid": os.getpid(), "start": request.start,
                       "prefix": list(request.prefix), "params": dict(request.params), "model": model,
                       "headers": dict(request.headers), "principal": request.principal})
    with open(calls_file, "a") as calls:            # one short write per call: lines never interleave
        calls.write(line + "\n")


def counting(request: StreamRequest, word: str = "t", model: str = "model",
             delay_s: float | None = None) -> AsyncIterator[str]:
    """Record the call, then tokens ``" <word><start>"`` .. ``" <word><n-1>"``, each after ``delay_s``
    (None: the query's ``delay_ms``, default 5; a chat's are its body's fields).  ``hold_at``: the first call
    (``start`` 0) waits before that index until its process dies, so a test kills an owner surely mid-answer."""
    asked = request.chat.body if request.chat is not None else request.params
    n = int(asked.get("n", "20"))
    delay = float(asked.get("delay_ms", "5")) / 1000 if delay_s is None else delay_s
    hold = int(asked.get("hold_at", "-1")) if request.start == 0 else -1
    record(request, model)

    async def tokens() -> AsyncIterator[str]:
        for index in range(request.start, n):
            if index == hold:
                await asyncio.Event().wait()        # held until the process is killed
            await asyncio.sleep(delay)
            yield f" {word}{index}"

    return tokens()


async def model(request: StreamRequest) -> AsyncIterator[str]:
    """Tokens ``" t<start>"`` .. ``" t<n-1>"``, each after ``delay_ms``: a continuation picks up at ``start``."""
    return counting(request)


def prefix_app(mounts: Mapping[str, TokenStreams]) -> App:
    """One app serving each of ``mounts`` (prefix -> app) under its prefix."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(mounts, receive, send)
            return
        path = str(scope["path"])
        for prefix, mounted in mounts.items():
            if path == prefix or path.startswith(prefix + "/"):
                await mounted({**scope, "root_path": str(scope.get("root_path", "")) + prefix}, receive, send)
                return
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    return app


async def _lifespan(mounts: Mapping[str, TokenStreams], receive: Any, send: Any) -> None:
    async with contextlib.AsyncExitStack() as stack:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                for mounted in mounts.values():
                    await stack.enter_async_context(mounted.lifespan())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await stack.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return
