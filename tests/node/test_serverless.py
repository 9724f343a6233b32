"""The serverless simulator (``support.serverless_sim``): three uvicorn instances on one redis-server behind haproxy
(round robin, no stickiness), each SIGKILLed after a 6-second life and replaced.  Streams of about 30 seconds are
read through haproxy by the npm ``eventsource`` client and by httpx-sse (reconnecting as an EventSource does) while
instances die under them:

- a model with continuation (``takeover="continue"``) arrives complete, in order, each index once, across at
  least five instance deaths, and each continuation was handed exactly the logged prefix;
- the canned answer (its deterministic takeover) arrives complete the same way;
- a model without continuation ends with the early-stop ``done`` (``"owner lost"``), never hangs.

The streams all run at once, in the module's one simulator (``runs``); each test checks its own.  Every wait is
bounded: a reader gives up after 90 s, the node client after 100 s.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.redis import running_redis
from support.requirements import require_eventsource
from support.serverless_sim import Followed, ServerlessSim, follow

from tokenwire.core.model import ANSWER

# The 30-second answers: 300 tokens at 100 ms, and the canned 277 at 100 ms.
N, DELAY_MS = 300, 100
MODEL_TEXT = "".join(f" t{i}" for i in range(N))
# An instance lives this long; there are three.
LIFE_S, INSTANCES = 6.0, 3
TIMEOUT_S = 90

# The npm eventsource client, reconnecting by itself with Last-Event-ID until `done` or an `error` with data.
SCRIPT = r"""
const EventSource = require(process.argv[2]);
const source = new EventSource(process.argv[3]);
const seen = {tokens: [], opens: [], errors: 0, end: null, started: Date.now(), ended: null};
source.addEventListener('open', (e) => { if (e.data) seen.opens.push(JSON.parse(e.data)); });
source.addEventListener('token', (e) => seen.tokens.push([Number(e.lastEventId), e.data]));
const finish = (e) => {
  seen.end = [e.type, JSON.parse(e.data)];
  seen.ended = Date.now();
  source.close();
  console.log(JSON.stringify(seen));
  process.exit(0);
};
source.addEventListener('done', finish);
source.addEventListener('failed', finish);
source.addEventListener('error', () => { seen.errors += 1; });
setTimeout(() => { console.log(JSON.stringify(seen)); process.exit(3); }, 90000);
"""


def _made(sim: ServerlessSim, mount: str, query: str) -> dict[str, Any]:
    """Create a stream through haproxy; a create whose instance died under it is tried again, as a client would."""
    for _ in range(5):
        try:
            got = httpx.post(f"{sim.url}{mount}/streams?{query}", timeout=10)
        except httpx.HTTPError:
            continue
        if got.status_code not in (502, 503, 504):
            assert got.status_code == 201, got.text
            return dict(got.json())
    raise AssertionError(f"no instance created a stream for {mount}/streams?{query} in 5 tries")


def _node(sim: ServerlessSim, script: Path, url: str) -> dict[str, Any]:
    done = subprocess.run(["node", str(script), str(require_eventsource()), sim.url + url], capture_output=True,
                          text=True, timeout=TIMEOUT_S + 10)
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return dict(json.loads(done.stdout))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Every stream of this module, read at once through the simulator while its instances die."""
    tmp = tmp_path_factory.mktemp("serverless")
    calls, script = tmp / "calls.jsonl", tmp / "read.js"
    script.write_text(SCRIPT)
    require_eventsource()                            # skip (or fail) before starting anything
    with running_redis() as redis_server:
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?lease_ms=600&block_ms=100",
               "TOKENWIRE_TEST_CALLS": str(calls)}
        with ServerlessSim("support.apps.serverless:app", env, instances=INSTANCES, life_s=LIFE_S) as sim:
            streams = {
                "node": _made(sim, "/continued", f"n={N}&delay_ms={DELAY_MS}"),
                "httpx": _made(sim, "/continued", f"n={N}&delay_ms={DELAY_MS}"),
                "canned": _made(sim, "/canned", f"tokens=277&producer_ms={DELAY_MS}"),
                "ended": _made(sim, "/ended", f"n={N}&delay_ms={DELAY_MS}"),
            }
            readers: dict[str, Callable[[], object]] = {
                "node": lambda: _node(sim, script, streams["node"]["events_url"]),
                **{name: (lambda url=made["events_url"]: follow(sim.url + url, timeout_s=TIMEOUT_S))
                   for name, made in streams.items() if name != "node"},
            }
            results: dict[str, Any] = {}
            threads = [threading.Thread(target=lambda n=name, r=read: results.__setitem__(n, r()))
                       for name, read in readers.items()]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(TIMEOUT_S + 20)
            kills = list(sim.kills)
    lines = calls.read_text().splitlines() if calls.exists() else []
    yield {"streams": streams, "results": results, "kills": kills, "calls": [json.loads(line) for line in lines]}


def _deaths(runs: dict[str, Any], start: float, end: float) -> int:
    return sum(1 for kill in runs["kills"] if start <= kill.at <= end)


def _prefixes_exact(runs: dict[str, Any], stream_id: str) -> list[int]:
    """The starts of every factory call for ``stream_id``, once each is checked to have had exactly the log."""
    calls = [call for call in runs["calls"] if call["stream_id"] == stream_id]
    for call in calls:
        assert call["prefix"] == [f" t{i}" for i in range(call["start"])], call["start"]
        assert call["params"] == {"n": str(N), "delay_ms": str(DELAY_MS)}
    return [call["start"] for call in calls]


def test_a_continued_model_read_by_eventsource_completes_across_five_instance_deaths(runs: dict[str, Any]) -> None:
    seen = runs["results"]["node"]
    ids = [index for index, _ in seen["tokens"]]
    assert ids == list(range(N)), "every index once, in order"
    assert "".join(text for _, text in seen["tokens"]) == MODEL_TEXT
    assert seen["end"][0] == "done" and seen["end"][1]["tokens"] == N and "stopped_early" not in seen["end"][1]
    assert sum(1 for kill in runs["kills"] if seen["started"] / 1000 <= kill.wall <= seen["ended"] / 1000) >= 5
    assert len(seen["opens"]) >= 2 and [o["start_index"] for o in seen["opens"]] == sorted(
        o["start_index"] for o in seen["opens"])
    starts = _prefixes_exact(runs, runs["streams"]["node"]["stream_id"])
    assert starts[0] == 0 and len(starts) >= 2 and starts == sorted(set(starts)), starts


def test_a_continued_model_read_by_httpx_sse_completes_across_five_instance_deaths(runs: dict[str, Any]) -> None:
    got: Followed = runs["results"]["httpx"]
    assert got.ids == list(range(N)) and got.text == MODEL_TEXT
    assert got.end is not None and got.end[0] == "done" and "stopped_early" not in got.end[1]
    assert _deaths(runs, got.started, got.ended) >= 5
    assert len(got.opens) >= 2 and not [s for s in got.statuses if 400 <= s < 500]     # never lost, never refused
    starts = _prefixes_exact(runs, runs["streams"]["httpx"]["stream_id"])
    assert starts[0] == 0 and len(starts) >= 2 and starts == sorted(set(starts)), starts


def test_the_canned_answer_completes_across_five_instance_deaths(runs: dict[str, Any]) -> None:
    got: Followed = runs["results"]["canned"]
    assert got.ids == list(range(277)) and got.text == "".join(ANSWER)
    assert got.end is not None and got.end[0] == "done"
    assert _deaths(runs, got.started, got.ended) >= 5


def test_a_model_without_continuation_ends_with_the_early_stop_done(runs: dict[str, Any]) -> None:
    got: Followed = runs["results"]["ended"]
    assert got.end is not None and got.end[0] == "done", got.end
    assert got.end[1]["stopped_early"] is True and got.end[1]["reason"] == "owner lost"
    assert got.ids == list(range(len(got.ids))) and len(got.ids) < N
    assert got.end[1]["tokens"] == len(got.ids)
    assert _prefixes_exact(runs, runs["streams"]["ended"]["stream_id"]) == [0]      # never called again
