"""Cross-origin front ends: a headless Chromium page served on one origin (127.0.0.1:A) uses
tokenwire on another (127.0.0.1:B, uvicorn serving the deployment example behind Starlette's ``CORSMiddleware`` as
the README configures it): a ``POST`` with a bearer token (preflighted), ``EventSource`` with credentials (the
session cookie) and without (an open mount), a ``fetch`` resume with ``Last-Event-ID`` (preflighted), and the AI
SDK's ``x-workflow-run-id`` and ``x-workflow-stream-tail-index`` read from JavaScript, by hand and by the AI SDK's own
transports (``ai@6``, ``@workflow/ai@6`` from npm, loaded in the page through an import map).  A page on an origin
the configuration does not name reads nothing.  The preflights are the middleware's: tokenwire's own 405 for OPTIONS
answers only an OPTIONS that is not one.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.asgi import ROOT, Uvicorn, uvicorn
from support.cdp import Page, browser_page
from support.docs import marked_block
from support.requirements import NODE_MODULES, require_ai_sdk

# The export conditions a browser's bundler picks, in order (never "require": CommonJS does not load as a module).
_CONDITIONS = ("browser", "import", "module", "default")


def _target(entry: Any) -> str | None:
    """The file an ``exports`` entry names for a browser (None: none, or only for CommonJS or types)."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict):
        for condition in _CONDITIONS:
            if condition in entry:
                found = _target(entry[condition])
                if found is not None:
                    return found
    return None


def import_map(root: Path = NODE_MODULES, base: str = "/nm/") -> dict[str, str]:
    """Bare specifier -> URL for every package under ``root`` (its ``exports``, else ``module`` or ``main``)."""
    imports: dict[str, str] = {}
    for manifest in [*root.glob("*/package.json"), *root.glob("@*/*/package.json")]:
        name = manifest.parent.relative_to(root).as_posix()
        data = json.loads(manifest.read_text(encoding="utf-8"))
        exports = data.get("exports")
        if not isinstance(exports, dict) or not any(key.startswith(".") for key in exports):
            exports = {".": exports or data.get("module") or data.get("main") or "index.js"}
        for subpath, entry in exports.items():
            target = _target(entry)
            if target is not None and "*" not in subpath and subpath != "./package.json":
                specifier = name if subpath == "." else f"{name}/{subpath.removeprefix('./')}"
                imports[specifier] = f"{base}{name}/{target.removeprefix('./')}"
    return imports


# @vercel/oidc (the AI Gateway provider's, which no transport calls) ships CommonJS only, which a bundler converts
# and a browser cannot load as a module: the page gets a module with the two names the gateway imports.
OIDC_SHIM = (b"export const getContext = () => ({});\n"
             b"export const getVercelOidcToken = async () => { throw new Error('no OIDC token in a browser'); };\n")


def front_page() -> bytes:
    """A page with an import map of the installed npm packages, so the AI SDK loads as a front end loads it."""
    imports = {**import_map(), "@vercel/oidc": "/shim/vercel-oidc.js"}
    script = json.dumps({"imports": imports}).replace("</", "<\\/")
    return (f"<!doctype html><html lang=en><title>front end</title>"
            f"<script type=importmap>{script}</script><p>a front end on its own origin</p>").encode()


class _Front(BaseHTTPRequestHandler):
    """The front end's origin: the page, and the npm packages under ``/nm/`` as JavaScript modules."""

    def do_GET(self) -> None:  # noqa: N802 - the handler's name is http.server's
        if self.path.startswith("/nm/"):
            file = (NODE_MODULES / self.path[4:].split("?")[0]).resolve()
            if not file.is_relative_to(NODE_MODULES.resolve()) or not file.is_file():
                self.send_error(404)
                return
            body, kind = file.read_bytes(), "text/javascript; charset=utf-8"
        elif self.path == "/shim/vercel-oidc.js":
            body, kind = OIDC_SHIM, "text/javascript; charset=utf-8"
        else:
            body, kind = front_page(), "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

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
    with uvicorn("support.apps.cors:app", env=env) as server:
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


# The AI SDK's own transports, loaded from npm (ai@6, @workflow/ai@6) on the front end's origin, talking to tokenwire
# on the other: WorkflowChatTransport's POST (cut by the server after 3 tokens, so it must resume with startIndex from
# x-workflow-run-id), its tail read (a negative startIndex and x-workflow-stream-tail-index), and
# DefaultChatTransport's send and reconnect.
SDK_SCRIPT = r"""
(async () => {
  const api = %(api)s + "/tokens/chat", out = {};
  const { WorkflowChatTransport } = await import("/nm/@workflow/ai/dist/workflow-chat-transport.js");
  const { DefaultChatTransport } = await import("ai");
  const drain = async (stream) => {
    const chunks = [], reader = stream.getReader();
    for (;;) { const { done, value } = await reader.read(); if (done) return chunks; chunks.push(value); }
  };
  const text = (chunks) => chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join("");
  const messages = [{id: "m1", role: "user", parts: [{type: "text", text: "resume me across origins"}]}];
  const auth = {"authorization": "Bearer alice-token", "content-type": "application/json"};
  const urls = [];
  const workflow = new WorkflowChatTransport({
    api,
    fetch: (url, init) => { urls.push(String(url)); return fetch(url, init); },
    prepareSendMessagesRequest: ({messages}) => ({body: {messages, cut_after: 3}, headers: auth}),
    prepareReconnectToStreamRequest: ({api}) => ({api, credentials: "include"}),
    onChatSendMessage: (res) => { out.runId = res.headers.get("x-workflow-run-id"); },
  });
  const sent = await drain(await workflow.sendMessages({chatId: "w1", messages, trigger: "submit-message"}));
  out.workflow = {types: sent.map((c) => c.type), text: text(sent), urls: urls.map((u) => u.slice(api.length))};
  const tail = await drain(await workflow.reconnectToStream({chatId: out.runId, startIndex: -2}));
  out.tail = tail.map((c) => c.type);
  const plain = new DefaultChatTransport({api, credentials: "include"});
  const answered = await drain(await plain.sendMessages({chatId: "d1", messages, trigger: "submit-message"}));
  out.plain = {text: text(answered), reconnect: await plain.reconnectToStream({chatId: "d1"})};
  return out;
})()
"""


def test_the_ai_sdks_transports_in_the_page_resume_across_origins(api: Uvicorn, front: int, page: Page) -> None:
    require_ai_sdk(node=False)                     # the page loads them; no node runs
    page.send("Network.setCookie", {"name": "session", "value": "alice-token", "url": api.url + "/"})
    page.open(f"http://127.0.0.1:{front}/", width=800)
    out = dict(page.eval(SDK_SCRIPT % {"api": json.dumps(api.url)}))
    run_id, workflow = out["runId"], out["workflow"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", run_id)
    assert workflow["text"] == "alice, you asked: resume me across origins"
    assert workflow["types"][:3] == ["start", "start-step", "text-start"] and workflow["types"][-1] == "finish"
    assert workflow["urls"] == ["", f"/{run_id}/stream?startIndex=6"]      # the POST cut after chunk 5, one resume
    assert out["tail"] == ["finish-step", "finish"]
    assert out["plain"] == {"text": "alice, you asked: resume me across origins", "reconnect": None}
