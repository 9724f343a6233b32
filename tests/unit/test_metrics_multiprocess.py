"""What the docs say of metrics on a server of several processes holds: each process reports its own figures, and
``prometheus_client``'s multiprocess mode gathers none of them (they are read from the app when scraped, never
written to its files), so the docs do not send an operator there."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from support.docs import all_text

from tokenwire.asgi import TokenStreams


def test_multiprocess_mode_gathers_none_of_tokenwires_figures_and_the_docs_say_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    streams = TokenStreams(lambda request: iter(["a", "b"]), metrics=True)

    async def three_streams() -> str:
        async with (streams.lifespan(),
                    httpx.AsyncClient(transport=httpx.ASGITransport(app=streams), base_url="http://t") as client):
            for _ in range(3):
                made = await client.post("/streams")
                await client.get(made.json()["events_url"])
            return (await client.get("/metrics")).text

    assert re.search(r"^tokenwire_streams_created_total 3\.0$", asyncio.run(three_streams()), re.M)
    gathered = CollectorRegistry()
    multiprocess.MultiProcessCollector(gathered, path=str(tmp_path))
    assert "tokenwire" not in generate_latest(gathered).decode()
    text = " ".join(all_text().split())
    assert "multiprocess mode does not gather these figures" in text
    assert "or put your own app on `prometheus_client`'s multiprocess mode" not in text
