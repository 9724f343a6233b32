"""The apps the continuation and serverless tests serve with uvicorn; this module holds no tests.

``app`` mounts, on the token log ``TOKENWIRE_TEST_LOG`` names (Redis):

- ``/continued``: a model (``TokenStreams(..., takeover="continue")``) that
  yields ``" t<i>"`` for ``i`` from ``request.start`` to ``n - 1``, each
  after ``delay_ms``; every call of its factory appends one JSON line to the
  file ``TOKENWIRE_TEST_CALLS`` names (the stream, the pid, ``start`` and the
  ``prefix`` it was handed), so a test reads what each process was given
  even after the process was killed;
- ``/ended``: the same model with the default takeover (a dead owner ends
  the stream with ``"owner lost"``);
- ``/another``: another model (``" y<i>"``, its calls recorded with
  ``"model": "another"``), also with ``takeover="continue"``: it must never
  continue a stream the first model made;
- ``/canned``: the canned answer.

``TOKENWIRE_TEST_GRACE_S`` sets their shutdown grace.  Run by uvicorn with ``--app-dir tests``:
``serverless_apps:app``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from tokenwire.asgi import StreamRequest, TokenStreams

_LOG = os.environ.get("TOKENWIRE_TEST_LOG") or "memory"
_CALLS = os.environ.get("TOKENWIRE_TEST_CALLS")
_GRACE_S = float(os.environ.get("TOKENWIRE_TEST_GRACE_S", "10"))


def _record(request: StreamRequest, model: str = "model") -> None:
    if _CALLS is None:
        return
    line = json.dumps({"stream_id": request.stream_id, "pid": os.getpid(), "start": request.start,
                       "prefix": list(request.prefix), "params": dict(request.params), "model": model})
    with open(_CALLS, "a") as calls:            # one short write per call: lines never interleave
        calls.write(line + "\n")


async def model(request: StreamRequest) -> AsyncIterator[str]:
    """Tokens ``" t<start>"`` .. ``" t<n-1>"``, each after ``delay_ms``: a continuation picks up at ``start``."""
    n = int(request.params.get("n", "20"))
    delay = float(request.params.get("delay_ms", "5")) / 1000
    _record(request)

    async def tokens() -> AsyncIterator[str]:
        for index in range(request.start, n):
            await asyncio.sleep(delay)
            yield f" t{index}"

    return tokens()


async def another_model(request: StreamRequest) -> AsyncIterator[str]:
    """Another answer, ``" y<start>"`` ..: what a continuation by the wrong model would splice in."""
    _record(request, "another")

    async def tokens() -> AsyncIterator[str]:
        for index in range(request.start, int(request.params.get("n", "20"))):
            await asyncio.sleep(0.005)
            yield f" y{index}"

    return tokens()


continued = TokenStreams(model, log=_LOG, takeover="continue", grace_s=_GRACE_S)
another = TokenStreams(another_model, log=_LOG, takeover="continue", grace_s=_GRACE_S)
ended = TokenStreams(model, log=_LOG, grace_s=_GRACE_S)
canned = TokenStreams(log=_LOG, grace_s=_GRACE_S)


MOUNTS = {"/continued": continued, "/ended": ended, "/another": another, "/canned": canned}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The apps mounted by path prefix (no framework: a fresh instance starts in a fraction of a second)."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    path = str(scope["path"])
    for prefix, mounted in MOUNTS.items():
        if path == prefix or path.startswith(prefix + "/"):
            await mounted({**scope, "root_path": str(scope.get("root_path", "")) + prefix}, receive, send)
            return
    await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


async def _lifespan(receive: Any, send: Any) -> None:
    async with contextlib.AsyncExitStack() as stack:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                for mounted in MOUNTS.values():
                    await stack.enter_async_context(mounted.lifespan())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await stack.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return
