"""Cross-origin front ends (issue 24, item 3): a headless Chromium page served on one origin (127.0.0.1:A) uses
tokenwire on another (127.0.0.1:B, uvicorn serving the deployment example behind Starlette's ``CORSMiddleware`` as
the README configures it): a ``POST`` with a bearer token (preflighted), ``EventSource`` with credentials (the
session cookie) and without (an open mount), a ``fetch`` resume with ``Last-Event-ID`` (preflighted), and the AI
SDK's ``x-workflow-run-id`` and ``x-workflow-stream-tail-index`` read from JavaScript.  A page on an origin the
configuration does not name reads nothing.  The preflights are the middleware's: tokenwire's own 405 for OPTIONS
answers only an OPTIONS that is not one.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from asgi_helpers import ROOT, Uvicorn, uvicorn
from doc_text import marked_block
from test_pages_cdp import Page, browser_page

FRONT_PAGE = b"<!doctype html><html lang=en><title>front end</title><p>a front end on its own origin</p>"


class _Front(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the handler's name is http.server's
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(FRONT_PAGE)))
        self.end_headers()
        self.wfile.write(FRONT_PAGE)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        pass


@pytest.fixture(scope="module")
def front() -> Iterator[int]:
    """A front end's origin: a page server on 127.0.0.1 (its port)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Front)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def api(front: int) -> Iterator[Uvicorn]:
    env = {"FRONT_END_ORIGIN": f"http://127.0.0.1:{front}", "API_TOKENS": "alice-token:alice,bob-token:bob",
           "WORD_DELAY_S": "0.01"}
    with uvicorn("cors_apps:app", env=env) as server:
        yield server


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    with browser_page() as opened:
        yield opened


# Everything a front end does, run in the page; resolves with what JavaScript could read.
SCRIPT = r"""
(async () => {
  const api = %(api)s, out = {};
  const readEvents = (url, init) => new Promise((resolve) => {
    const seen = [], source = new EventSource(url, init);
    source.addEventListener("token", (e) => seen.push([e.lastEventId, e.data]));
    source.addEventListener("done", (e) => { source.close(); resolve({tokens: seen, done: JSON.parse(e.data)}); });
    source.addEventListener("error", (e) => {      // a refusal closes it; a dropped connection reconnects
      if (!(e instanceof MessageEvent) && source.readyState === EventSource.CLOSED) {
        resolve({tokens: seen, refused: true});
      }
    });
  });
  // A create with a bearer token: a preflight for Authorization; the exposed Location.
  let r = await fetch(api + "/tokens/streams?prompt=tokens+over+the+wire+and+back",
                      {method: "POST", headers: {"Authorization": "Bearer alice-token"}});
  const made = await r.json();
  out.created = [r.status, r.headers.get("location"), made.events_url];
  // EventSource with credentials: the session cookie names Alice.
  out.read = await readEvents(api + made.events_url, {withCredentials: true});
  // The same stream without credentials: refused (401), and a fetch can read that status.
  out.anonymous = await readEvents(api + made.events_url);
  out.anonymousStatus = (await fetch(api + made.events_url)).status;
  // A resume with fetch and Last-Event-ID: a preflight for Last-Event-ID.
  r = await fetch(api + made.events_url, {credentials: "include", headers: {"Last-Event-ID": "2"}});
  out.resumed = [r.status, await r.text()];
  // EventSource without credentials, on a route that asks for none.
  const open = await (await fetch(api + "/open/streams?tokens=6&producer_ms=1", {method: "POST"})).json();
  out.open = await readEvents(api + open.events_url);
  // The AI SDK's requests: a JSON POST /chat (preflighted), its x-workflow-run-id; a tail read.
  r = await fetch(api + "/tokens/chat", {method: "POST", credentials: "include",
    headers: {"content-type": "application/json"},
    body: JSON.stringify({id: "chat-1", trigger: "submit-message",
                          messages: [{id: "m1", role: "user", parts: [{type: "text", text: "hi there"}]}]})});
  out.chat = [r.status, r.headers.get("x-workflow-run-id"), await r.text()];
  r = await fetch(api + "/tokens/chat/" + out.chat[1] + "/stream?startIndex=-1", {credentials: "include"});
  out.tail = [r.status, r.headers.get("x-workflow-stream-tail-index"), await r.text()];
  return out;
})()
"""

# What a page on an origin the configuration does not name tries; resolves with how each attempt ended.
STRANGER = r"""
(async () => {
  const api = %(api)s, out = [];
  for (const init of [{method: "POST", headers: {"Authorization": "Bearer alice-token"}},
                      {method: "POST", credentials: "include"}]) {
    try { out.push((await fetch(api + "/tokens/streams", init)).status); } catch (e) { out.push(e.name); }
  }
  return out;
})()
"""


def ids_and_text(body: str) -> tuple[list[int], str]:
    """The token ids and text of an event-stream body."""
    tokens = re.findall(r"id: (\d+)\nevent: token\ndata: (.*)\n", body)
    return [int(i) for i, _ in tokens], "".join(data for _, data in tokens)


def test_a_page_on_another_origin_creates_reads_resumes_and_reads_the_sdk_headers(api: Uvicorn, front: int,
                                                                                   page: Page) -> None:
    page.send("Network.setCookie", {"name": "session", "value": "alice-token", "url": api.url + "/"})
    page.open(f"http://127.0.0.1:{front}/", width=800)
    out = dict(page.eval(SCRIPT % {"api": json.dumps(api.url)}))
    words = "alice, you asked: tokens over the wire and back".split()
    text = "".join(w if i == 0 else " " + w for i, w in enumerate(words))
    status, location, events_url = out["created"]
    assert (status, location) == (201, events_url)
    assert [int(i) for i, _ in out["read"]["tokens"]] == list(range(len(words)))
    assert "".join(data for _, data in out["read"]["tokens"]) == text and out["read"]["done"]["tokens"] == len(words)
    assert out["anonymous"] == {"tokens": [], "refused": True} and out["anonymousStatus"] == 401
    resumed_status, body = out["resumed"]
    ids, resumed_text = ids_and_text(body)
    assert resumed_status == 200 and ids == list(range(3, len(words))) and text.endswith(resumed_text)
    assert len(out["open"]["tokens"]) == 6 and out["open"]["done"]["tokens"] == 6
    chat_status, run_id, chat_body = out["chat"]
    assert chat_status == 200 and re.fullmatch(r"[A-Za-z0-9_-]{22}", run_id)
    assert "alice, you asked: hi there" == "".join(
        json.loads(line[6:])["delta"] for line in chat_body.splitlines()
        if line.startswith("data: {") and json.loads(line[6:])["type"] == "text-delta")
    tail_status, tail_index, tail_body = out["tail"]
    assert tail_status == 200 and tail_index is not None and int(tail_index) >= 3
    assert f"id: {tail_index}\n" in tail_body


def test_a_page_on_an_origin_not_named_reads_nothing(api: Uvicorn, front: int, page: Page) -> None:
    page.open(f"http://localhost:{front}/", width=800)          # same port, another origin: not FRONT_END_ORIGIN
    assert page.eval(STRANGER % {"api": json.dumps(api.url)}) == ["TypeError", "TypeError"]


def test_preflights_are_the_middlewares_and_tokenwires_405_answers_only_a_plain_options(api: Uvicorn,
                                                                                        front: int) -> None:
    origin = f"http://127.0.0.1:{front}"
    asked = {"Origin": origin, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type, last-event-id"}
    for path in ("/tokens/streams", "/tokens/chat", "/tokens/streams/some-id/events"):
        preflight = httpx.options(api.url + path, headers=asked)
        assert preflight.status_code == 200, path
        assert preflight.headers["access-control-allow-origin"] == origin
        assert preflight.headers["access-control-allow-credentials"] == "true"
        assert set(preflight.headers["access-control-allow-headers"].split(", ")) >= {
            "authorization", "content-type", "last-event-id"}
    plain = httpx.options(api.url + "/tokens/streams", headers={"Origin": origin})
    assert plain.status_code == 405 and plain.headers["allow"] == "POST"
    assert plain.headers["access-control-allow-origin"] == origin          # readable by the page, too
    stranger = httpx.options(api.url + "/tokens/streams", headers={**asked, "Origin": "http://evil.example"})
    assert stranger.status_code == 400 and "access-control-allow-origin" not in stranger.headers


def test_the_readme_shows_the_middleware_configuration_the_example_and_this_test_run() -> None:
    shown = marked_block("cors-config", "python")
    example = (ROOT / "examples" / "deploy.py").read_text(encoding="utf-8")
    ran = re.search(r"# cors-config\n(.*?)# end cors-config\n", example, re.S)
    assert ran is not None
    assert shown == ran.group(1)
