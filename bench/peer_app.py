"""The peer for item 5: sse-starlette on uvicorn, serving tokenwire's stream at the same pace.

How this works: ``GET /stream?tokens=&producer_ms=&seed=`` answers with an
``EventSourceResponse`` whose generator sends what tokenwire's server sends
(``retry`` + ``open``, one ``token`` event per token with ``id: <index>``,
``done``), each built as sse-starlette's ``ServerSentEvent``.  The pace is
tokenwire's own timing model for the same parameters (the same seed gives
the same per-token costs), slept by absolute deadline on the event loop, so
both servers are asked for exactly the same work at exactly the same
instants.  Run as ``python -m bench.peer_app PORT``; it prints ``ready``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from tokenwire.core.frames import DEFAULT_RETRY_MS
from tokenwire.core.model import ANSWER
from tokenwire.core.pipeline import RunSpec


async def stream(request: Request) -> EventSourceResponse:
    query = request.query_params
    spec = RunSpec(tokens=int(query.get("tokens", len(ANSWER))), producer_ms=float(query.get("producer_ms", 20)),
                   seed=int(query.get("seed", 1)), capacity=int(query.get("buffer", 4)))
    costs = spec.timing().costs(spec.tokens)

    async def events() -> AsyncIterator[ServerSentEvent]:
        loop = asyncio.get_running_loop()
        opened = {"stream_id": "peer", "resumed": False, "start_index": 0, "policy": "block",
                  "buffer": spec.capacity}
        yield ServerSentEvent(json.dumps(opened), event="open", retry=DEFAULT_RETRY_MS)
        deadline = loop.time()
        for index, text in enumerate(ANSWER[:spec.tokens]):
            deadline += costs[index] / 1e9
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            yield ServerSentEvent(text, event="token", id=str(index))
        done = {"tokens": spec.tokens, "delivered_from": 0, "dropped": 0}
        yield ServerSentEvent(json.dumps(done), event="done", id=str(spec.tokens - 1))

    return EventSourceResponse(events())


app = Starlette(routes=[Route("/stream", stream)])


def main(port: int) -> None:
    import uvicorn
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                            backlog=4096, lifespan="off")
    server = uvicorn.Server(config)
    print("ready", flush=True)
    server.run()


if __name__ == "__main__":
    main(int(sys.argv[1]))
