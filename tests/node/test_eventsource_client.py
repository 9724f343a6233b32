"""The npm ``eventsource`` client (2.x, what Node programs use) against the ASGI app on uvicorn: it resumes a
cut stream by itself with ``Last-Event-ID``, and resumes one httpx-sse cut, to the exact text, each id once.

``.ci/run`` installs the client into ``.ci/node`` (git-ignored); without Node or the client the tests skip,
and fail under ``TOKENWIRE_REQUIRE_ALL=1``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.asgi import Uvicorn, read_stream, uvicorn
from support.requirements import require_eventsource

from tokenwire.core.model import ANSWER

TIMEOUT_S = 20

# Reads one stream with the eventsource package: it reconnects by itself (after the stream's `retry`) with
# Last-Event-ID until the `done` or `failed` event, then prints what it saw as JSON.
SCRIPT = r"""
const EventSource = require(process.argv[2]);
const [url, lastId] = [process.argv[3], process.argv[4]];
const source = new EventSource(url, lastId ? {headers: {'Last-Event-ID': lastId}} : {});
const seen = {tokens: [], opens: [], end: null};
source.addEventListener('open', (e) => { if (e.data) seen.opens.push(JSON.parse(e.data)); });
source.addEventListener('token', (e) => seen.tokens.push([e.lastEventId, e.data]));
const finish = (e) => {
  seen.end = [e.type, JSON.parse(e.data)];
  source.close();
  console.log(JSON.stringify(seen));
  process.exit(0);
};
source.addEventListener('done', finish);
source.addEventListener('failed', finish);
setTimeout(() => { console.log(JSON.stringify(seen)); process.exit(3); }, 15000);
"""


@pytest.fixture(scope="module")
def server() -> Iterator[Uvicorn]:
    with uvicorn("support.apps.fake_model:app") as running:
        yield running


def eventsource(script: Path, url: str, last_id: str = "") -> dict[str, Any]:
    done = subprocess.run(["node", str(script), str(require_eventsource()), url, last_id], capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return dict(json.loads(done.stdout))


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "read.js"
    path.write_text(SCRIPT)
    return path


@pytest.mark.parametrize(("mount", "query", "expected"), [
    ("/tokens", "n=30&delay_ms=1&cut_after=12", "".join(f" t{i}" for i in range(30))),
    ("/canned", "tokens=40&producer_ms=0.5&cut_after=12", "".join(ANSWER[:40])),
])
def test_eventsource_resumes_a_cut_stream_by_itself(server: Uvicorn, script: Path, mount: str, query: str,
                                                    expected: str) -> None:
    made = httpx.post(f"{server.url}{mount}/streams?{query}").json()
    seen = eventsource(script, server.url + made["events_url"])
    ids = [int(i) for i, _ in seen["tokens"]]
    assert ids == list(range(len(ids))) and "".join(t for _, t in seen["tokens"]) == expected
    assert [o["resumed"] for o in seen["opens"]] == [False, True]         # one cut, one resume
    assert [o["start_index"] for o in seen["opens"]] == [0, 12]
    assert seen["end"][0] == "done"


def test_eventsource_resumes_what_httpx_sse_was_cut_from(server: Uvicorn, script: Path) -> None:
    url = server.url + httpx.post(f"{server.url}/tokens/streams?n=25&delay_ms=2").json()["events_url"]
    first = read_stream(url, stop_after=7)
    seen = eventsource(script, url, first.tokens[-1].id)
    assert first.ids + [int(i) for i, _ in seen["tokens"]] == list(range(25))
    assert first.text + "".join(t for _, t in seen["tokens"]) == "".join(f" t{i}" for i in range(25))
    assert seen["end"] == ["done", {"tokens": 25, "delivered_from": 7, "dropped": 0}]
