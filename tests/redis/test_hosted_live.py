"""The hosted live page (``api/live.py``, the second Vercel function) under uvicorn: with ``TOKENWIRE_LOG_URL`` on a
real redis-server it serves ``/live`` and its files and resumes a cut stream on another instance; without it, a
503 naming the setting; with ``TOKENWIRE_MAX_DURATION_S`` it ends each connection in time and the npm
``eventsource`` client comes back by itself, to the whole answer; and the report links to ``/live`` where the live
function has its log.  (What Vercel reads, ``vercel.json`` and ``requirements.txt``: ``unit/test_handler.py``.)
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from support.asgi import ROOT, read_stream, uvicorn
from support.redis import running_redis
from support.requirements import require_eventsource
from support.sentinel import running_sentinels

from tokenwire.asgi.hosted import SHARED_SCHEMES
from tokenwire.core.model import ANSWER
from tokenwire.endpoints.page import LIVE_CSP
from tokenwire.handler import LIVE_LOG_ENV, LIVE_LOG_SCHEMES, handler
from tokenwire.redislog.streams import LOG_URL_ENV

API = ROOT / "api"


def test_the_live_function_serves_the_page_and_resumes_a_cut_stream_on_another_instance() -> None:
    with running_redis() as redis_server:
        env = {LOG_URL_ENV: redis_server.url}
        with uvicorn("live:app", env=env, app_dir=API) as one, uvicorn("live:app", env=env, app_dir=API) as other:
            page = httpx.get(f"{one.url}/live")
            script = httpx.get(f"{other.url}/static/live.js")
            head = httpx.head(f"{one.url}/static/live.css")
            made = httpx.post(f"{one.url}/streams?tokens=50&producer_ms=1&cut_after=20")
            url = made.json()["events_url"]
            first = read_stream(one.url + url)                      # cut after 20 tokens
            rest = read_stream(other.url + url, headers={"Last-Event-ID": first.tokens[-1].id})
            once = read_stream(f"{other.url}/stream?tokens=10&producer_ms=1")
    assert page.status_code == 200 and page.headers["content-security-policy"] == LIVE_CSP
    assert b"/static/live.js" in page.content
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 0
    assert made.status_code == 201
    assert first.ids == list(range(20)) and first.last.event == "token"
    assert first.ids + rest.ids == list(range(50)) and first.text + rest.text == "".join(ANSWER[:50])
    assert rest.last.event == "done"
    assert once.ids == list(range(10)) and once.last.event == "done"


def test_the_live_function_takes_a_sentinel_url_and_resumes_on_another_instance(tmp_path: Path) -> None:
    """``TOKENWIRE_LOG_URL=redis+sentinel://...``, as ``tokenwire serve --log`` takes it: the page is served, not the
    503 for a log no instance shares, and a cut stream resumes on the other instance; the report links to it."""
    with running_sentinels(tmp_path, replicas=1) as redis:
        env = {LOG_URL_ENV: redis.url}
        with uvicorn("live:app", env=env, app_dir=API) as one, uvicorn("live:app", env=env, app_dir=API) as other:
            page = httpx.get(f"{one.url}/live")
            url = httpx.post(f"{one.url}/streams?tokens=30&producer_ms=1&cut_after=10").json()["events_url"]
            first = read_stream(one.url + url)
            rest = read_stream(other.url + url, headers={"Last-Event-ID": first.tokens[-1].id})
    assert page.status_code == 200 and b"/static/live.js" in page.content, page.text
    assert first.ids + rest.ids == list(range(30)) and rest.last.event == "done"
    assert first.text + rest.text == "".join(ANSWER[:30])


@pytest.mark.parametrize(("method", "path"), [("GET", "/live"), ("POST", "/streams?tokens=5"),
                                              ("GET", "/streams/abc/events"), ("GET", "/stream"),
                                              ("GET", "/api/live")])
def test_without_a_log_the_live_function_answers_503_naming_the_setting(method: str, path: str,
                                                                      no_log: str) -> None:
    got = httpx.request(method, no_log + path)
    assert got.status_code == 503 and got.headers["content-type"].startswith("application/json")
    assert got.json() == {"error": "the live page needs a token log every instance shares: set TOKENWIRE_LOG_URL "
                                   "to a redis://, rediss://, redis+sentinel:// or rediss+sentinel:// URL "
                                   "(it is not set)"}


def test_without_a_log_the_page_files_are_still_served(no_log: str) -> None:
    assert httpx.get(no_log + "/static/live.css").status_code == 200


@pytest.fixture(scope="module")
def no_log() -> Iterator[str]:
    with uvicorn("live:app", env={LOG_URL_ENV: ""}, app_dir=API) as server:
        yield server.url


@contextmanager
def _report_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_report_links_to_live_where_the_live_function_has_its_log(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LIVE_LOG_ENV == LOG_URL_ENV and LIVE_LOG_SCHEMES == SHARED_SCHEMES
    with _report_server() as url:
        monkeypatch.delenv(LOG_URL_ENV, raising=False)
        alone = httpx.get(f"{url}/?format=html&tokens=20").text
        monkeypatch.setenv(LOG_URL_ENV, "rediss://user:secret@example.invalid:6380/0")
        beside = httpx.get(f"{url}/?format=html&tokens=20").text
        monkeypatch.setenv(LOG_URL_ENV, "redis+sentinel://:secret@example.invalid:26379/mymaster/0")
        sentinel = httpx.get(f"{url}/?format=html&tokens=20").text
    assert 'href="/live?' not in alone and 'href="/live?' in beside and 'href="/live?' in sentinel
    assert "secret" not in beside and "secret" not in sentinel


# The npm eventsource client reads one stream to its `done`, reconnecting by itself, and prints what it saw.
NODE_READER = r"""
const EventSource = require(process.argv[2]);
const source = new EventSource(process.argv[3]);
const seen = {tokens: [], opens: [], end: null};
source.addEventListener('open', (e) => { if (e.data) seen.opens.push(JSON.parse(e.data)); });
source.addEventListener('token', (e) => seen.tokens.push([Number(e.lastEventId), e.data]));
source.addEventListener('done', (e) => {
  seen.end = JSON.parse(e.data);
  source.close();
  console.log(JSON.stringify(seen));
  process.exit(0);
});
setTimeout(() => { console.log(JSON.stringify(seen)); process.exit(3); }, 30000);
"""


def test_max_duration_ends_each_connection_and_an_eventsource_comes_back_at_once(tmp_path: Path) -> None:
    client = require_eventsource()
    script = tmp_path / "read.js"
    script.write_text(NODE_READER)
    with running_redis() as redis_server:
        env = {LOG_URL_ENV: redis_server.url, "TOKENWIRE_MAX_DURATION_S": "1"}
        with uvicorn("live:app", env=env, app_dir=API) as one, uvicorn("live:app", env=env, app_dir=API) as other:
            made = httpx.post(f"{one.url}/streams?tokens=150&producer_ms=20").json()
            done = subprocess.run(["node", str(script), str(client), other.url + made["events_url"]],
                                  capture_output=True, text=True, timeout=40)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    seen = json.loads(done.stdout)
    assert [index for index, _ in seen["tokens"]] == list(range(150))
    assert "".join(text for _, text in seen["tokens"]) == "".join(ANSWER[:150])
    assert len(seen["opens"]) >= 3 and all(o["resumed"] for o in seen["opens"][1:])    # cut every second
    assert seen["end"]["tokens"] == 150
