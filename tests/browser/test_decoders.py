"""The SSE decoders people run, reading a model that thinks across several heartbeats.

Both servers: a user's model through ``TokenStreams`` under uvicorn with a 20 ms heartbeat (``support.apps.fake_model``,
150 ms a token), and ``tokenwire serve --heartbeat-s 0.02`` with the canned answer at 100 ms a token.  Each
decoder reads the stream live and must see exactly ``open``, the tokens and ``done``: httpx-sse, sseclient-py,
the openai SDK's ``SSEDecoder`` (which also parses every non-token event's JSON, as its ``Stream`` does: an
empty phantom event raises there), npm ``eventsource-parser`` and ``eventsource`` (node), and Chromium's
``EventSource`` (what its listeners get, and every message the DevTools protocol says it received).  A model
that fails ends with ``failed`` in each; no stream carries an event named ``error``.  Both routes that stream:
``GET /stream``, and ``GET /streams/<id>/events`` of a ``POST /streams`` cut by the server and resumed with
``Last-Event-ID``; and ``POST /chat``, whose AI SDK chunks the Python decoders and ``eventsource-parser`` (what
the SDK reads them with) see as those chunks and nothing else, a failing model's ``error`` being a chunk in
``data``, never an SSE event.

Each read also shows that the heartbeats were there: the Python decoders' bytes are kept (a recording
transport) and hold several ``: ping`` lines, each between two frames, none followed by a blank line, and no
frame without data; ``eventsource-parser`` counts the comments it skipped; Chromium's bytes received, less the
frames it dispatched, are a whole number of heartbeats.  The README's browser example is run as written.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sseclient
from httpx_sse import connect_sse
from openai._streaming import SSEDecoder
from support.asgi import uvicorn
from support.cdp import Page, browser_page
from support.docs import marked_block
from support.requirements import require_node_package
from support.served import serve

from tokenwire.core.frames import DEFAULT_RETRY_MS, HEARTBEAT
from tokenwire.core.model import ANSWER
from tokenwire.core.sse import encode

TIMEOUT_S = 30.0
HEARTBEAT_S = "0.02"

# One event as every decoder is asked to give it: (type, data, id), "" for no id.
Seen = tuple[str, str, str]


@dataclass(frozen=True)
class Server:
    """A running server, the stream of a model that thinks (and of one that fails, where there is one)."""

    name: str
    url: str
    thinking: str                 # GET path of a stream whose tokens come slower than the heartbeat
    texts: tuple[str, ...]        # its tokens
    failing: str | None = None    # GET path of a stream whose model raises after FAILING_AT tokens
    chat: str = "/chat"           # the chat route, and the fields of a body that makes the thinking stream
    chat_fields: tuple[tuple[str, object], ...] = ()

    @property
    def create(self) -> str:
        """The POST that makes the thinking stream, cut by the server after CUT_AFTER tokens."""
        path, _, query = self.thinking.partition("?")
        return f"{path}s?{query}&cut_after={CUT_AFTER}"


FAILING_AT = 2
CUT_AFTER = 2


@pytest.fixture(scope="module")
def asgi() -> Iterator[Server]:
    """A user's model (``support.apps.fake_model``' fake model) through ``TokenStreams`` under uvicorn."""
    with uvicorn("support.apps.fake_model:app", env={"TOKENWIRE_TEST_HEARTBEAT_S": HEARTBEAT_S}) as running:
        yield Server("asgi", running.url, "/tokens/stream?n=4&delay_ms=150", tuple(f" t{i}" for i in range(4)),
                     f"/tokens/stream?n=4&delay_ms=150&mode=raise&at={FAILING_AT}", "/tokens/chat",
                     (("n", 4), ("delay_ms", 150)))


@pytest.fixture(scope="module")
def served() -> Iterator[Server]:
    """``tokenwire serve`` with the canned answer (which never fails)."""
    with serve("asyncio", "--heartbeat-s", HEARTBEAT_S) as running:
        yield Server("serve", f"http://127.0.0.1:{running.port}", "/stream?tokens=4&producer_ms=100",
                     tuple(ANSWER[:4]), chat_fields=(("tokens", 4), ("producer_ms", 100)))


@pytest.fixture(params=["asgi", "served"])
def server(request: pytest.FixtureRequest) -> Server:
    """Each server in turn."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def failing_path(server: Server) -> str:
    assert server.failing is not None
    return server.failing


# ---------------------------------------------------------------- what every read must be


def check_events(seen: list[Seen], texts: tuple[str, ...], ending: str | None = "done",
                 start: int = 0) -> dict[str, Any]:
    """``seen`` is exactly open (at ``start``), one token per text (ids ``start``..), then ``ending`` (None: the
    connection was cut); returns the ending's JSON."""
    assert [kind for kind, _, _ in seen] == ["open", *["token"] * len(texts), *([ending] if ending else [])], seen
    opened = json.loads(seen[0][1])
    assert (opened["resumed"], opened["start_index"], seen[0][2]) == (start > 0, start, "")
    tokens = seen[1:1 + len(texts)]
    assert [(data, ident) for _, data, ident in tokens] == [(t, str(i)) for i, t in enumerate(texts, start)]
    if ending is None:
        return {}
    assert seen[-1][2] == (str(start + len(texts) - 1) if start + len(texts) else "")
    return dict(json.loads(seen[-1][1]))


OPEN_START = b"retry: %d\nevent: open\ndata: {" % DEFAULT_RETRY_MS      # retry, in the frame with data
CHAT_START = b'retry: %d\nid: 0\ndata: {"type":"start",' % DEFAULT_RETRY_MS    # retry, in the first chunk


def check_wire(raw: bytes, pings_at_least: int = 2, first: bytes = OPEN_START) -> int:
    """The bytes of one stream: heartbeats (several, unless told), only between frames, none ending a block;
    every frame carries data and none is named ``error``.  Returns the number of heartbeats."""
    assert raw.startswith(first), raw[:80]
    pings = raw.count(HEARTBEAT)
    assert pings >= pings_at_least, raw
    assert b": ping\n\n" not in raw                          # a comment never ends a block of its own
    for at in (m.start() for m in re.finditer(re.escape(HEARTBEAT), raw)):
        assert at == 0 or raw[:at].endswith((b"\n\n", HEARTBEAT)), raw[max(0, at - 40):at + 20]
    blocks = [b for b in raw.replace(HEARTBEAT, b"").split(b"\n\n") if b]
    assert all(re.search(rb"(^|\n)data: ", block) for block in blocks), blocks
    assert not any(re.search(rb"(^|\n)event: ?error\n", block) for block in blocks), blocks
    return pings


# ---------------------------------------------------------------- the Python decoders, fed live


class _Tee(httpx.SyncByteStream):
    """A response body that keeps a copy of every byte it passes on."""

    def __init__(self, stream: httpx.SyncByteStream, raw: bytearray) -> None:
        self._stream, self._raw = stream, raw

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            self._raw += chunk
            yield chunk

    def close(self) -> None:
        self._stream.close()


class _Recording(httpx.HTTPTransport):
    """The usual transport; each response's body is also kept in ``raw``."""

    def __init__(self) -> None:
        super().__init__()
        self.raw = bytearray()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.stream = _Tee(response.stream, self.raw)  # type: ignore[arg-type]
        return response


# A decoder reads (client, url, the JSON body of a POST or None for a GET).
Decoder = Callable[[httpx.Client, str, "dict[str, Any] | None"], list[Seen]]


def _request(body: dict[str, Any] | None) -> dict[str, Any]:
    return {"method": "GET"} if body is None else {"method": "POST", "json": body}


def _httpx_sse(client: httpx.Client, url: str, body: dict[str, Any] | None) -> list[Seen]:
    with connect_sse(client, url=url, **_request(body)) as source:
        assert source.response.status_code == 200
        return [(e.event, e.data, e.id) for e in source.iter_sse()]


def _sseclient(client: httpx.Client, url: str, body: dict[str, Any] | None) -> list[Seen]:
    with client.stream(url=url, **_request(body)) as response:
        assert response.status_code == 200
        return [(e.event, e.data, e.id or "") for e in sseclient.SSEClient(response.iter_bytes()).events()]


def _openai(client: httpx.Client, url: str, body: dict[str, Any] | None) -> list[Seen]:
    seen: list[Seen] = []
    with client.stream(url=url, **_request(body)) as response:
        assert response.status_code == 200
        for sse in SSEDecoder().iter_bytes(response.iter_bytes()):
            if sse.event != "token" and sse.data != "[DONE]":
                sse.json()                     # what the SDK's Stream does with an event; '' raises
            seen.append((sse.event or "message", sse.data, sse.id or ""))
    return seen


PYTHON: dict[str, Decoder] = {"httpx-sse": _httpx_sse, "sseclient-py": _sseclient, "openai": _openai}


def read_python(decoder: str, url: str, headers: dict[str, str] | None = None,
                body: dict[str, Any] | None = None) -> tuple[list[Seen], bytes]:
    transport = _Recording()
    with httpx.Client(transport=transport, timeout=TIMEOUT_S, headers=headers) as client:
        return PYTHON[decoder](client, url, body), bytes(transport.raw)


@pytest.mark.parametrize("decoder", list(PYTHON))
def test_python_decoders_see_open_the_tokens_and_done_across_heartbeats(server: Server, decoder: str) -> None:
    seen, raw = read_python(decoder, server.url + server.thinking)
    done = check_events(seen, server.texts)
    assert done["tokens"] == len(server.texts)
    check_wire(raw)


@pytest.mark.parametrize("decoder", list(PYTHON))
def test_python_decoders_read_a_created_stream_cut_then_resumed(server: Server, decoder: str) -> None:
    made = httpx.post(server.url + server.create, timeout=TIMEOUT_S)
    assert made.status_code == 201, made.text
    url = server.url + made.json()["events_url"]
    cut, raw_cut = read_python(decoder, url)
    check_events(cut, server.texts[:CUT_AFTER], ending=None)
    check_wire(raw_cut)
    rest, raw_rest = read_python(decoder, url, {"Last-Event-ID": str(CUT_AFTER - 1)})
    check_events(rest, server.texts[CUT_AFTER:], start=CUT_AFTER)
    check_wire(raw_rest, pings_at_least=0)              # what was logged meanwhile comes at once


@pytest.mark.parametrize("decoder", list(PYTHON))
def test_python_decoders_see_a_failing_model_end_with_failed(asgi: Server, decoder: str) -> None:
    seen, raw = read_python(decoder, asgi.url + failing_path(asgi))
    failed = check_events(seen, asgi.texts[:FAILING_AT], ending="failed")
    assert failed == {"error": "the model raised RuntimeError", "tokens": FAILING_AT}
    check_wire(raw)


# ---------------------------------------------------------------- the chat route: the AI SDK's chunks


def chat_body(server: Server, **more: object) -> dict[str, Any]:
    return {"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}], **dict(server.chat_fields),
            **more}


def check_chunks(seen: list[Seen], texts: tuple[str, ...], failed: bool = False) -> None:
    """``seen`` is the UI message stream of ``texts`` and nothing else: unnamed events, each with data."""
    assert {kind for kind, _, _ in seen} == {"message"}, seen
    assert seen[-1][1] == "[DONE]"
    chunks = [json.loads(data) for _, data, _ in seen[:-1]]
    ending = ["text-end", *(["error"] if failed else []), "finish-step", "finish"]
    assert [c["type"] for c in chunks] == ["start", "start-step", "text-start", *["text-delta"] * len(texts),
                                           *ending], chunks
    assert [ident for _, _, ident in seen[:-1]] == [str(n) for n in range(len(chunks))]
    assert tuple(c["delta"] for c in chunks if c["type"] == "text-delta") == texts
    assert chunks[-1]["finishReason"] == ("error" if failed else "stop")


@pytest.mark.parametrize("decoder", list(PYTHON))
def test_python_decoders_read_a_thinking_chat_as_its_chunks_and_nothing_else(server: Server, decoder: str) -> None:
    seen, raw = read_python(decoder, server.url + server.chat, body=chat_body(server))
    check_chunks(seen, server.texts)
    check_wire(raw, first=CHAT_START)


@pytest.mark.parametrize("decoder", list(PYTHON))
def test_python_decoders_read_a_failing_chat_with_the_sdks_error_chunk(asgi: Server, decoder: str) -> None:
    seen, raw = read_python(decoder, asgi.url + asgi.chat, body=chat_body(asgi, mode="raise", at=FAILING_AT))
    check_chunks(seen, asgi.texts[:FAILING_AT], failed=True)
    check_wire(raw, first=CHAT_START)                   # the error is a chunk in data, no SSE event is named error


# ---------------------------------------------------------------- node: eventsource-parser and eventsource

PARSER_SCRIPT = r"""
const { createParser } = require(process.argv[2]);
const seen = { events: [], comments: 0, errors: [] };
const parser = createParser({
  onEvent: (e) => seen.events.push([e.event ?? "message", e.data, e.id ?? ""]),
  onComment: () => { seen.comments += 1; },
  onError: (error) => seen.errors.push(String(error)),
});
const body = process.argv[4];
(async () => {
  const response = await fetch(process.argv[3], body ? { method: "POST", body } : {});
  const text = new TextDecoder();
  for await (const chunk of response.body) parser.feed(text.decode(chunk, { stream: true }));
  console.log(JSON.stringify(seen));
})().catch((error) => { console.error(error); process.exit(2); });
"""

# Every event the EventSource dispatches to a listener of any name tokenwire or the EventSource uses.
EVENTSOURCE_SCRIPT = r"""
const EventSource = require(process.argv[2]);
const source = new EventSource(process.argv[3]);
const seen = { events: [], connects: 0, drops: 0 };
const record = (e) => seen.events.push([e.type, e.data, e.lastEventId ?? ""]);
source.addEventListener("open", (e) => { if (e.data !== undefined) record(e); else seen.connects += 1; });
for (const name of ["message", "token", "ping"]) source.addEventListener(name, record);
const end = (e) => { record(e); source.close(); console.log(JSON.stringify(seen)); process.exit(0); };
source.addEventListener("done", end);
source.addEventListener("failed", end);
source.addEventListener("error", (e) => { if (e.data !== undefined) record(e); else seen.drops += 1; });
setTimeout(() => { console.log(JSON.stringify(seen)); process.exit(3); }, 20000);
"""


def run_node(script: str, package: str, url: str, tmp_path: Path, body: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    path = tmp_path / "read.js"
    path.write_text(script)
    posted = [] if body is None else [json.dumps(body)]
    done = subprocess.run(["node", str(path), str(require_node_package(package)), url, *posted], capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return dict(json.loads(done.stdout))


def _seen(events: list[list[str]]) -> list[Seen]:
    return [(kind, data, ident) for kind, data, ident in events]


def check_parser(got: dict[str, Any], texts: tuple[str, ...], ending: str) -> None:
    check_events(_seen(got["events"]), texts, ending=ending)
    assert got["errors"] == [] and got["comments"] >= 2          # it skipped the heartbeats, and nothing else


def test_eventsource_parser_sees_open_the_tokens_and_done(server: Server, tmp_path: Path) -> None:
    check_parser(run_node(PARSER_SCRIPT, "eventsource-parser", server.url + server.thinking, tmp_path),
                 server.texts, "done")


def test_eventsource_parser_sees_a_failing_model_end_with_failed(asgi: Server, tmp_path: Path) -> None:
    check_parser(run_node(PARSER_SCRIPT, "eventsource-parser", asgi.url + failing_path(asgi), tmp_path),
                 asgi.texts[:FAILING_AT], "failed")


def test_eventsource_parser_reads_a_thinking_chat_as_its_chunks(server: Server, tmp_path: Path) -> None:
    got = run_node(PARSER_SCRIPT, "eventsource-parser", server.url + server.chat, tmp_path, chat_body(server))
    # eventsource-parser gives each event its own id: [DONE] has none
    check_chunks([(kind, data, ident) for kind, data, ident in got["events"]], server.texts)
    assert got["errors"] == [] and got["comments"] >= 2


def check_eventsource(got: dict[str, Any], texts: tuple[str, ...], ending: str) -> None:
    check_events(_seen(got["events"]), texts, ending=ending)
    assert (got["connects"], got["drops"]) == (1, 0)


def test_npm_eventsource_sees_open_the_tokens_and_done(server: Server, tmp_path: Path) -> None:
    check_eventsource(run_node(EVENTSOURCE_SCRIPT, "eventsource", server.url + server.thinking, tmp_path),
                      server.texts, "done")


def test_npm_eventsource_sees_a_failing_model_end_with_failed(asgi: Server, tmp_path: Path) -> None:
    check_eventsource(run_node(EVENTSOURCE_SCRIPT, "eventsource", asgi.url + failing_path(asgi), tmp_path),
                      asgi.texts[:FAILING_AT], "failed")


# ---------------------------------------------------------------- Chromium's EventSource

# The same listeners in the page; resolves with what they got once the stream ends.
PAGE_SCRIPT = r"""
new Promise((resolve) => {
  const seen = { events: [], connects: 0, drops: 0 };
  const source = new EventSource(%s);
  const record = (e) => seen.events.push([e.type, e.data, e.lastEventId]);
  source.addEventListener("open", (e) => { if (e instanceof MessageEvent) record(e); else seen.connects += 1; });
  for (const name of ["message", "token", "ping"]) source.addEventListener(name, record);
  const end = (e) => { record(e); source.close(); resolve(seen); };
  source.addEventListener("done", end);
  source.addEventListener("failed", end);
  source.addEventListener("error", (e) => { if (e instanceof MessageEvent) record(e); else seen.drops += 1; });
  setTimeout(() => { source.close(); resolve(seen); }, 20000);
})
"""


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    with browser_page() as opened:
        yield opened


def frame_bytes(seen: list[Seen]) -> int:
    """How many bytes tokenwire's frames for ``seen`` take on the wire."""
    return sum(len(encode(data, event=kind, id=ident or None, retry=DEFAULT_RETRY_MS if kind == "open" else None))
               for kind, data, ident in seen)


def read_chromium(page: Page, server: Server, path: str) -> tuple[dict[str, Any], list[Seen], int]:
    """What the page's listeners got, every message the EventSource received (DevTools), and its bytes."""
    page.open(f"{server.url}/not-a-page", width=800, bypass_csp=True)    # any page of the server's origin
    page.browser.events.clear()
    got = dict(page.eval(PAGE_SCRIPT % json.dumps(path)))
    page.eval("1")                                                      # let the protocol's events arrive
    events = page.browser.events
    messages = [e["params"] for e in events if e.get("method") == "Network.eventSourceMessageReceived"]
    received = sum(e["params"]["dataLength"] for e in events if e.get("method") == "Network.dataReceived"
                   and e["params"]["requestId"] in {m["requestId"] for m in messages})
    return got, [(m["eventName"], m["data"], m["eventId"]) for m in messages], received


def check_chromium(read: tuple[dict[str, Any], list[Seen], int], texts: tuple[str, ...], ending: str) -> None:
    got, messages, received = read
    check_eventsource(got, texts, ending)
    check_events(messages, texts, ending=ending)                      # every message it received, any name
    heartbeats, rest = divmod(received - frame_bytes(messages), len(HEARTBEAT))
    assert rest == 0 and heartbeats >= 2, (received, frame_bytes(messages))


def test_chromium_eventsource_sees_open_the_tokens_and_done(server: Server, page: Page) -> None:
    check_chromium(read_chromium(page, server, server.thinking), server.texts, "done")


def test_chromium_eventsource_sees_a_failing_model_end_with_failed(asgi: Server, page: Page) -> None:
    check_chromium(read_chromium(page, asgi, failing_path(asgi)), asgi.texts[:FAILING_AT], "failed")


# ---------------------------------------------------------------- the README's browser example


def readme_example() -> str:
    return marked_block("browser-example", "js")


def run_readme_example(page: Page, server: Server, create: str) -> tuple[list[str], str]:
    """Create a stream with ``POST create``, run the README's example on its events_url; its console and text."""
    page.open(f"{server.url}/not-a-page", width=800, bypass_csp=True)
    setup = (f"const made = await (await fetch({json.dumps(create)}, {{method: 'POST'}})).json();"
             "const eventsUrl = made.events_url;"
             "document.body.innerHTML = '<pre id=\"answer\"></pre>';")
    page.eval(f"(async () => {{ {setup} {readme_example()}; window.source = source; }})()")
    page.wait_until("window.source.readyState === EventSource.CLOSED", "the example to close its EventSource")
    page.eval("1")
    logged = [" ".join(str(a.get("value")) for a in e["params"]["args"]) for e in page.browser.events
              if e.get("method") == "Runtime.consoleAPICalled"]
    return logged, str(page.eval("document.getElementById('answer').textContent"))


def test_the_readme_browser_example_tells_both_opens_apart_across_a_reconnect(asgi: Server, page: Page) -> None:
    logged, text = run_readme_example(page, asgi, "/tokens/streams?n=5&delay_ms=100&cut_after=2")
    failing, failed_text = run_readme_example(page, asgi, "/tokens/streams?n=5&delay_ms=100&mode=raise&at=3")
    stream = next(line for line in logged if line.startswith("stream "))
    assert logged == ["connected", stream, "connected", "resumed at token 2", "done"]
    assert text == "".join(f" t{i}" for i in range(5))
    assert failing[0] == "connected" and failing[1].startswith("stream ")
    assert failing[2:] == ["failed: the model raised RuntimeError"]
    assert failed_text == " t0 t1 t2"


# ---------------------------------------------------------------- the live page


def test_the_live_page_says_that_a_model_failed_and_stops(page: Page) -> None:
    with uvicorn("support.apps.fake_model:live", env={"TOKENWIRE_TEST_HEARTBEAT_S": HEARTBEAT_S}) as running:
        page.open(f"{running.url}/live?n=6&delay_ms=50&mode=raise&at=3", width=800)
        page.wait_until("document.body.dataset.state === 'failed'", "the page to end on the failed frame")
        seen = page.eval("JSON.parse(document.getElementById('result').textContent)")
        error = page.eval("document.getElementById('error').textContent")
    assert error == "The stream failed: the model raised RuntimeError"
    assert seen["ids"] == [0, 1, 2] and seen["errors"] == ["the model raised RuntimeError"]
    assert len(seen["connections"]) == 1                 # it did not reconnect
