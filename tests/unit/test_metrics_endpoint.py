"""``GET /metrics`` without a socket (the ASGI app through httpx's transport, the endpoints' scrape): two apps in one
process count apart and the metrics app mounts; an app without metrics answers 404 naming how, and without
``prometheus_client`` asking names the extra; the authorize hook is asked with action ``scrape``; the histogram
buckets count at or below each bound, as a bisect would.  (A real scrape of both servers, promtool, Redis:
``processes/test_prometheus.py``.)
"""

from __future__ import annotations

import asyncio
import bisect
import sys

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st

from tokenwire.asgi import TokenStreams
from tokenwire.core.buckets import Buckets
from tokenwire.endpoints.config import LiveConfig
from tokenwire.endpoints.decide import Endpoints
from tokenwire.endpoints.decisions import LiveRequest
from tokenwire.endpoints.exposition import EXTRA_HINT
from tokenwire.endpoints.metering import ITL_BUCKETS, TTFT_BUCKETS, Meter
from tokenwire.endpoints.registry import Registry

CONTENT_TYPE = "text/plain; version=1.0.0; charset=utf-8"      # prometheus_client's CONTENT_TYPE_LATEST


def test_two_apps_in_one_process_count_apart_and_metrics_app_mounts() -> None:
    one, two = TokenStreams(metrics=True), TokenStreams(metrics=True)
    app = FastAPI()
    app.mount("/metrics", one.metrics_app)
    app.mount("/", one)

    async def ask() -> tuple[str, str, int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://x") as client, \
                httpx.AsyncClient(transport=httpx.ASGITransport(two), base_url="http://x") as other:
            assert (await client.post("/streams?tokens=3")).status_code == 201
            mounted, theirs = await client.get("/metrics/"), await other.get("/metrics")
            posted = await client.post("/metrics/")
            assert mounted.headers["content-type"] == theirs.headers["content-type"] == CONTENT_TYPE
            return mounted.text, theirs.text, posted.status_code

    mounted, theirs, posted = asyncio.run(ask())
    assert "tokenwire_streams_created_total 1.0" in mounted
    assert "tokenwire_streams_created_total 0.0" in theirs
    assert posted == 405


def test_an_app_without_metrics_answers_404_naming_how() -> None:
    async def ask() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(TokenStreams()), base_url="http://x") as client:
            return await client.get("/metrics")

    answer = asyncio.run(ask())
    assert (answer.status_code, answer.json()) == (404, {"error": "this app serves no metrics: make it with "
                                                                  "TokenStreams(metrics=True) (pip install "
                                                                  "'tokenwire[metrics]')"})


def test_without_prometheus_client_asking_for_metrics_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)      # import prometheus_client: ImportError
    with pytest.raises(ImportError, match=r"^metrics need prometheus_client: pip install 'tokenwire\[metrics\]'$"):
        TokenStreams(metrics=True)
    scrape = LiveRequest("GET", "/metrics", "", (), "-")
    answer = asyncio.run(Endpoints(Registry(), LiveConfig(), meter=Meter()).scrape(scrape))  # tokenwire serve's
    assert (answer.status, answer.body) == (501, f'{{"error": "{EXTRA_HINT}, then restart the server"}}'.encode())


def test_buckets_count_at_or_below_each_bound() -> None:
    b = Buckets((0.001, 0.01))
    for ns in (1_000_000, 1_000_001, 10_000_000, 10_000_001, 0):
        b.observe_ns(ns)
    assert b.cumulative() == [("0.001", 2), ("0.01", 4), ("+Inf", 5)]
    assert b.sum_ns == 22_000_002 and b.count == 5
    with pytest.raises(ValueError, match=r"^bounds must be positive and increasing, got \[0.01, 0.001\]$"):
        Buckets((0.01, 0.001))
    assert list(TTFT_BUCKETS) == sorted(TTFT_BUCKETS) and list(ITL_BUCKETS) == sorted(ITL_BUCKETS)


def test_the_authorize_hook_is_asked_for_a_scrape_with_action_scrape() -> None:
    asked: list[tuple[str, str | None]] = []

    def authorize(access) -> str | None:
        asked.append((access.action, access.headers.get("authorization")))
        return "ops" if access.headers.get("authorization") == "Bearer ops" else None

    streams = TokenStreams(metrics=True, authorize=authorize)
    app = FastAPI()
    app.mount("/metrics", streams.metrics_app)

    async def ask() -> list[int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://x") as client:
            return [(await client.get("/metrics/")).status_code,
                    (await client.get("/metrics/", headers={"Authorization": "Bearer ops"})).status_code,
                    (await httpx.AsyncClient(transport=httpx.ASGITransport(streams), base_url="http://x")
                     .get("/metrics", headers={"Authorization": "Bearer ops"})).status_code]

    assert asyncio.run(ask()) == [401, 200, 200]
    assert asked == [("scrape", None), ("scrape", "Bearer ops"), ("scrape", "Bearer ops")]


@given(st.lists(st.integers(0, 200_000_000_000), max_size=50))
def test_buckets_agree_with_a_bisect_of_the_bounds(values: list[int]) -> None:
    """The coarse table's fast path puts every value where a plain bisect of the bounds (in ns) would."""
    for bounds in (ITL_BUCKETS, TTFT_BUCKETS, (0.0001, 0.00025, 10.0)):
        b, edges = Buckets(bounds), [round(x * 1e9) for x in bounds]
        expected = [0] * (len(bounds) + 1)
        for value in [*values, *edges, *(e + 1 for e in edges), *(e - 1 for e in edges)]:
            b.observe_ns(value)
            expected[bisect.bisect_left(edges, value)] += 1
        assert b.counts == expected
