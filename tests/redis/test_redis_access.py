"""No credential reaches the Redis log or its log lines: a model that fails mid-answer on a header logs it redacted
(on the memory log and on Redis), and a continuable stream's logged request keeps every common credential header
out of Redis while a benign one is kept for the continuation.  (The ``authorize`` hook and the redaction without
Redis: ``unit/test_access.py``.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from support.credentials import CREDENTIAL_HEADERS, CREDENTIALED, CREDENTIALS
from support.redis import admin

from tokenwire.asgi import StreamRequest, TokenStreams


@pytest.mark.parametrize("shared", [False, True], ids=["memory", "redis"])
def test_a_model_that_fails_mid_answer_on_a_header_logs_no_credentials(shared: bool, request: pytest.FixtureRequest,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    log = request.getfixturevalue("redis_server").url if shared else "memory"

    async def model(asked: StreamRequest) -> AsyncIterator[str]:
        yield "a"
        raise RuntimeError(f"the upstream refused {asked.headers['authorization']}")

    async def read() -> str:
        streams = TokenStreams(model, log=log)
        async with (streams.lifespan(),
                    httpx.AsyncClient(transport=httpx.ASGITransport(app=streams), base_url="http://t") as client):
            made = await client.post("/streams", headers=dict(CREDENTIALED))
            return (await client.get(made.json()["events_url"])).text

    with caplog.at_level(logging.ERROR, logger="tokenwire"):
        assert 'event: failed\ndata: {"error": "the model raised RuntimeError", "tokens": 1}' in asyncio.run(read())
    assert "RuntimeError: the upstream refused [redacted]" in caplog.text
    assert "tok-alice-1234" not in caplog.text


def _everything_in(url: str) -> str:
    """Every key, field and value the Redis at ``url`` holds, as one text (whatever the key's type)."""
    import redis
    client = redis.Redis.from_url(admin(url))
    read = {"hash": client.hgetall, "stream": client.xrange, "string": client.get, "set": client.smembers,
            "zset": lambda key: client.zrange(key, 0, -1), "list": lambda key: client.lrange(key, 0, -1)}
    held = [(key, read[client.type(key).decode()](key)) for key in client.scan_iter()]
    client.close()
    return repr(held)


def test_a_continuable_streams_logged_request_keeps_no_credential_header(redis_server: Any) -> None:
    """Every common credential header stays out of Redis by default; a benign one is kept for the continuation."""
    async def model(asked: StreamRequest) -> AsyncIterator[str]:
        yield "a"

    async def create() -> None:
        streams = TokenStreams(model, log=redis_server.url, takeover="continue")
        async with (streams.lifespan(),
                    httpx.AsyncClient(transport=httpx.ASGITransport(app=streams), base_url="http://t") as client):
            made = await client.post("/streams", headers={**CREDENTIAL_HEADERS, "x-tenant": "tenant-acme-99"})
            assert made.status_code == 201
            assert "event: done" in (await client.get(made.json()["events_url"])).text

    asyncio.run(create())
    held = _everything_in(redis_server.url)
    assert "tenant-acme-99" in held                                     # the request is there, benign headers too
    assert [name for name, (_, secret) in CREDENTIALS.items() if secret in held] == []
