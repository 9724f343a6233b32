"""The deployment example, run as a deployment runs it: ``uvicorn deploy:app --app-dir examples``,
two processes on one real redis-server named by ``TOKENWIRE_LOG_URL``, users from ``API_TOKENS`` and the front end's
origin from ``FRONT_END_ORIGIN``.  No credentials is a 401; Alice's bearer token creates a stream on one process and
her session cookie reads it whole on the other; Bob gets the 404 of an unknown id; the front end's preflight is
answered; the model answers the user by name; ``/tokens/metrics`` answers the scraper's token only, passes
``promtool check metrics`` and counts what its process did.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import httpx
import pytest
from support.asgi import ROOT, Uvicorn, read_stream, uvicorn
from support.redis import running_redis
from support.requirements import require_binary

FRONT = "https://chat.example.com"


@pytest.fixture(scope="module")
def deployed() -> Iterator[tuple[Uvicorn, Uvicorn]]:
    with running_redis() as redis_server:
        env = {"TOKENWIRE_LOG_URL": redis_server.url, "FRONT_END_ORIGIN": FRONT,
               "API_TOKENS": "alice-token:alice,bob-token:bob", "WORD_DELAY_S": "0.01",
               "METRICS_TOKEN": "scraper-token"}
        with (uvicorn("deploy:app", env=env, app_dir=ROOT / "examples") as one,
              uvicorn("deploy:app", env=env, app_dir=ROOT / "examples") as other):
            yield one, other


def test_no_credentials_is_a_401(deployed: tuple[Uvicorn, Uvicorn]) -> None:
    one, _ = deployed
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Cookie": "session=wrong"}):
        got = httpx.post(f"{one.url}/tokens/streams?prompt=hi", headers=headers)
        assert got.status_code == 401 and got.headers["www-authenticate"] == 'Bearer realm="tokenwire"'


def test_alice_creates_on_one_process_and_reads_on_the_other_bob_gets_a_404(deployed: tuple[Uvicorn, Uvicorn]) -> None:
    one, other = deployed
    made = httpx.post(f"{one.url}/tokens/streams?prompt=resumable+streams", headers={
        "Authorization": "Bearer alice-token", "Origin": FRONT})
    assert made.status_code == 201 and made.headers["access-control-allow-origin"] == FRONT
    events_url = made.json()["events_url"]
    read = read_stream(other.url + events_url, headers={"Cookie": "session=alice-token"})
    assert read.text == "alice, you asked: resumable streams" and read.last.event == "done"
    resumed = read_stream(one.url + events_url, headers={"Authorization": "Bearer alice-token", "Last-Event-ID": "2"})
    assert resumed.ids == [3, 4] and resumed.text == " resumable streams"
    for server in (one, other):
        bobs = httpx.get(server.url + events_url, headers={"Authorization": "Bearer bob-token"})
        assert bobs.status_code == 404 and bobs.json()["error"].startswith("unknown stream ")


def test_a_chat_reaches_the_model_and_the_front_ends_preflight_is_answered(deployed: tuple[Uvicorn, Uvicorn]) -> None:
    one, other = deployed
    preflight = httpx.options(f"{other.url}/tokens/chat", headers={
        "Origin": FRONT, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == FRONT
    body = {"id": "c1", "trigger": "submit-message",
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "who am I"}]}]}
    chat = httpx.post(f"{one.url}/tokens/chat", json=body, timeout=10,
                      headers={"Authorization": "Bearer bob-token", "Origin": FRONT})
    assert chat.status_code == 200
    assert "x-workflow-run-id" in chat.headers["access-control-expose-headers"]
    deltas = [json.loads(line[6:]) for line in chat.text.splitlines() if line.startswith("data: {")]
    assert "".join(d["delta"] for d in deltas if d["type"] == "text-delta") == "bob, you asked: who am I"


def test_metrics_answer_the_scrapers_token_only_pass_promtool_and_count_this_processs_streams(
        deployed: tuple[Uvicorn, Uvicorn]) -> None:
    _, other = deployed
    scraper = {"Authorization": "Bearer scraper-token"}
    for headers in ({}, {"Authorization": "Bearer alice-token"}, {"Cookie": "session=alice-token"}):
        assert httpx.get(other.url + "/tokens/metrics", headers=headers).status_code == 401, headers

    def created() -> float:
        text = httpx.get(other.url + "/tokens/metrics", headers=scraper).text
        found = re.search(r"^tokenwire_streams_created_total (\S+)$", text, re.M)
        assert found is not None, text
        return float(found.group(1))

    before = created()
    for _ in range(3):
        assert httpx.post(f"{other.url}/tokens/streams?prompt=x", headers={"Cookie": "session=bob-token"}).is_success
    scrape = httpx.get(other.url + "/tokens/metrics", headers=scraper)
    assert scrape.status_code == 200 and created() == before + 3
    checked = subprocess.run([require_binary("promtool"), "check", "metrics"], input=scrape.text,
                             capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_cookie_sent_by_another_sites_page_is_no_credential(deployed: tuple[Uvicorn, Uvicorn]) -> None:
    """A plain POST from any page carries the user's cookie (no preflight): it must not create or stop in her name."""
    one, other = deployed
    made = httpx.post(f"{one.url}/tokens/streams?prompt=hers", headers={"Authorization": "Bearer alice-token"})
    stop_url = f"{other.url}/tokens/streams/{made.json()['stream_id']}/stop"
    evil = {"Cookie": "session=alice-token", "Origin": "https://evil.example"}
    for url in (f"{other.url}/tokens/streams?prompt=spend", f"{other.url}/tokens/chat", stop_url):
        refused = httpx.post(url, headers=evil, content=b'{"messages": []}')
        assert refused.status_code == 401, (url, refused.text)
    for front in ({"Origin": FRONT}, {}):                # the front end's own page, or no browser at all
        assert httpx.post(stop_url, headers={"Cookie": "session=alice-token", **front}).status_code == 200
