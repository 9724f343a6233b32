"""Every model iterator ``TokenStreams`` makes is closed once, whatever happens to its stream: read to the end,
never read and forgotten past ``max_streams``, never read and still kept at shutdown.

The app runs in this process (httpx's ASGI transport, inside the app's own lifespan), so the iterators can be
counted; the model is an iterator class with an ``aclose`` that counts, as a client holding an upstream
connection has."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
from support.live import await_until

from tokenwire.asgi import StreamRequest, TokenStreams


class Upstream:
    """An async iterator of ``n`` tokens that counts how often each one is closed."""

    made: list[Upstream] = []

    def __init__(self, n: int) -> None:
        self.left, self.closes = n, 0
        Upstream.made.append(self)

    def __aiter__(self) -> Upstream:
        return self

    async def __anext__(self) -> str:
        if self.left == 0:
            raise StopAsyncIteration
        self.left -= 1
        await asyncio.sleep(0)                    # an upstream's await: the loop runs meanwhile
        return " t"

    async def aclose(self) -> None:
        self.closes += 1


def model(request: StreamRequest) -> Upstream:
    return Upstream(int(request.params.get("n", "3")))


async def _run(streams: TokenStreams, unread: int) -> None:
    transport = httpx.ASGITransport(app=streams)
    async with streams.lifespan(), httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        made = await client.post("/streams?n=5")
        read = await client.get(made.json()["events_url"])            # read to the end: closed by its producer
        assert read.status_code == 200 and read.text.count("event: token") == 5
        for _ in range(unread):
            assert (await client.post("/streams?n=3")).status_code == 201
    await await_until(lambda: all(upstream.closes for upstream in Upstream.made),    # awaited on the loop
                      lambda: f"every iterator closed; {[u.closes for u in Upstream.made].count(0)} are not")


def test_every_model_iterator_is_closed_once_even_if_never_read() -> None:
    Upstream.made.clear()
    streams = TokenStreams(model, max_streams=100)
    asyncio.run(_run(streams, unread=150))
    assert len(Upstream.made) == 151
    assert Counter(upstream.closes for upstream in Upstream.made) == {1: 151}
