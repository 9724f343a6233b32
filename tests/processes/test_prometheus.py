"""``GET /metrics`` scraped for real: both servers' scrape passes ``promtool check metrics``, and after N streams and
k resumes its figures say N and k; refusals by status; on Redis, takeovers and log rounds.  (The endpoint without a
socket: ``unit/test_metrics_endpoint.py``.)"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.asgi import Uvicorn, read_stream, uvicorn
from support.instances import Instance, create, owners, request, runs
from support.live import serving, wait_until
from support.requirements import require_binary

from tokenwire.endpoints.exposition import METRICS

CONTENT_TYPE = "text/plain; version=1.0.0; charset=utf-8"      # prometheus_client's CONTENT_TYPE_LATEST
TOKENS = 20          # two sampled inter-token gaps a stream: before tokens 8 and 16


@pytest.fixture(scope="module")
def asgi() -> Iterator[Uvicorn]:
    with uvicorn("tokenwire.asgi:app") as server:
        yield server


def scrape(base: str) -> tuple[str, dict[str, float]]:
    """The scrape's text, and each sample by its name and labels (``name{label="v"}``)."""
    answer = httpx.get(f"{base}/metrics", timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == CONTENT_TYPE
    samples = {}
    for family in text_string_to_metric_families(answer.text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return answer.text, samples


def promtool_check(text: str) -> None:
    done = subprocess.run([require_binary("promtool"), "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), text


def run_streams(base: str, n: int, k: int) -> None:
    """N streams read whole, then k of them resumed after their third token (Last-Event-ID: 2)."""
    ids = []
    for _ in range(n):
        made = httpx.post(f"{base}/streams?tokens={TOKENS}&producer_ms=0.5", timeout=10)
        assert made.status_code == 201
        ids.append(made.json()["stream_id"])
        assert read_stream(f"{base}{made.json()['events_url']}").ids == list(range(TOKENS))
    for stream_id in ids[:k]:
        resumed = read_stream(f"{base}/streams/{stream_id}/events", headers={"Last-Event-ID": "2"})
        assert resumed.ids == list(range(3, TOKENS))


@pytest.mark.parametrize("server", ["serve", "uvicorn"])
def test_after_n_streams_and_k_resumes_the_scrape_says_n_and_k_and_passes_promtool(server: str,
                                                                                   asgi: Uvicorn) -> None:
    n, k = 4, 3
    with serving() as live:
        base = live.url if server == "serve" else asgi.url
        _, before = scrape(base)
        run_streams(base, n, k)
        text, after = scrape(base)
    promtool_check(text)
    for name, kind, _ in METRICS:
        if name != "tokenwire_log_round_seconds":       # a Redis log's only
            assert f"# TYPE {name} {kind}" in text, name
    grew = {name: after[name] - before.get(name, 0) for name in after}
    assert grew["tokenwire_streams_created_total"] == n
    assert grew["tokenwire_resumes_total"] == k
    assert grew["tokenwire_tokens_logged_total"] == n * TOKENS
    assert grew["tokenwire_tokens_sent_total"] == n * TOKENS + k * (TOKENS - 3)
    assert grew["tokenwire_time_to_first_token_seconds_count"] == n      # the connections from the first token
    assert grew["tokenwire_inter_token_latency_seconds_count"] == n * 2   # live gaps only: a resume replays
    assert after["tokenwire_streams_open"] == 0


def _read_whole(base: str, method: str, path: str, **asked: Any) -> httpx.Response:
    answer = httpx.request(method, f"{base}{path}", timeout=10, **asked)
    assert answer.status_code in (200, 201), answer.text
    return answer


@pytest.mark.parametrize("server", ["serve", "uvicorn"])
def test_every_connection_that_names_a_cursor_it_holds_is_a_resume_on_every_wire(server: str, asgi: Uvicorn) -> None:
    """A resume is a connection after a cursor the reader holds: ``Last-Event-ID``/``last_event_id``, a chat's
    ``startIndex`` past 0 and OpenAI's ``starting_after``, also where that cursor is still in the preamble (a
    chat's first three chunks, a response's first events: before, only a cursor past a token was counted); a
    read from the start, a chat's tail (``startIndex=-2``) or an empty ``Last-Event-ID`` is none."""
    chat = {"messages": [], "tokens": 4, "producer_ms": 0.1}
    with serving() as live:
        base = live.url if server == "serve" else asgi.url
        made = _read_whole(base, "POST", "/streams?tokens=4&producer_ms=0.1").json()["events_url"]
        read_stream(base + made)
        chat_id = _read_whole(base, "POST", "/chat", json=chat).headers["x-workflow-run-id"]
        response_id = _read_whole(base, "POST", "/v1/responses", json={"model": "m", "input": "hi", "tokens": 4,
                                                                        "producer_ms": 0.1}).json()["id"]
        _, before = scrape(base)
        resumes = [("GET", made, {"Last-Event-ID": "0"}), ("GET", f"{made}?last_event_id=2", {}),
                   ("GET", f"/chat/{chat_id}/stream?startIndex=1", {}),
                   ("GET", f"/chat/{chat_id}/stream?startIndex=6", {}),
                   ("GET", f"/chat/{chat_id}/stream", {"Last-Event-ID": "0"}),
                   ("GET", f"/v1/responses/{response_id}?stream=true&starting_after=0", {}),
                   ("GET", f"/v1/responses/{response_id}?stream=true&starting_after=5", {})]
        none = [("GET", made, {}), ("GET", made, {"Last-Event-ID": ""}),
                ("GET", f"/chat/{chat_id}/stream?startIndex=0", {}),
                ("GET", f"/chat/{chat_id}/stream?startIndex=-2", {}),
                ("GET", f"/v1/responses/{response_id}?stream=true", {})]
        for method, path, headers in [*resumes, *none]:
            _read_whole(base, method, path, headers=headers)
        text, after = scrape(base)
    promtool_check(text)
    assert after["tokenwire_resumes_total"] - before.get("tokenwire_resumes_total", 0) == len(resumes)
    assert after["tokenwire_streams_created_total"] - before["tokenwire_streams_created_total"] == 0


@pytest.mark.parametrize("server", ["serve", "uvicorn"])
def test_refusals_are_counted_by_status(server: str, asgi: Uvicorn) -> None:
    with serving() as live:
        base = live.url if server == "serve" else asgi.url
        _, before = scrape(base)
        asked = [httpx.get(f"{base}/streams/nosuchstream/events"), httpx.get(f"{base}/streams/nosuchstream/events"),
                 httpx.post(f"{base}/streams?tokens=0"), httpx.delete(f"{base}/streams"),
                 httpx.post(f"{base}/metrics")]
        assert [a.status_code for a in asked] == [404, 404, 400, 405, 405]
        _, after = scrape(base)
    grew = {status: after.get(f'tokenwire_refusals_total{{status="{status}"}}', 0)
            - before.get(f'tokenwire_refusals_total{{status="{status}"}}', 0) for status in (400, 404, 405, 410)}
    assert grew == {400: 1, 404: 2, 405: 2, 410: 0}


def test_on_redis_a_takeover_and_the_log_rounds_are_counted(redis_server) -> None:
    """A is SIGKILLed mid-stream; B resumes the reader and takes over: B's scrape says 1 takeover, the tokens it
    logged (read back from the Redis stream's owners), 1 resume, and its Redis rounds."""
    a, b = Instance(redis_server.url, "A"), Instance(redis_server.url, "B")
    try:
        n = 40
        events = create(a, f"tokens={n}&producer_ms=20&scenario=block")
        first = request(a.port, "GET", events, stop_after=10)
        a.kill()
        second = request(b.port, "GET", events, last_event_id=first.ids[-1])
        assert second.done and first.ids + second.ids == list(range(n))
        made = runs(owners(redis_server.url, events.split("/")[2], a, b))
        assert [name for name, _ in made] == ["A", "B"]

        def counted() -> tuple[str, dict[str, float]] | None:   # the writer's last round, once it is back
            text, samples = scrape(f"http://127.0.0.1:{b.port}")
            return (text, samples) if samples["tokenwire_tokens_logged_total"] == made[1][1] else None
        text, samples = wait_until(counted, f"B's scrape to count the {made[1][1]} tokens it logged")
    finally:
        a.kill()
        b.kill()
    promtool_check(text)
    assert samples["tokenwire_takeovers_total"] == 1
    assert samples["tokenwire_tokens_logged_total"] == made[1][1]
    assert samples["tokenwire_resumes_total"] == 1
    assert samples["tokenwire_streams_created_total"] == 0
    assert samples["tokenwire_log_round_seconds_count"] >= 1
    assert "# TYPE tokenwire_log_round_seconds histogram" in text
