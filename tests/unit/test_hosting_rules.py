"""What a hosted page relies on, without a socket: stream ids come from ``secrets`` with 128 bits and do not depend on
the request; the live page's script writes what the server says only as text; the real-clock report's budget fits
the serverless limit, and the command line refuses a run past it.  (The same over loopback:
``servers/test_security.py``.)
"""

from __future__ import annotations

import json
import string

import pytest
from support.requirements import ROOT

from tokenwire.core.pipeline import RunSpec
from tokenwire.endpoints import registry as registry_module
from tokenwire.endpoints.registry import STREAM_ID_BYTES, Registry
from tokenwire.report.render import REAL_BUDGET_MS

URLSAFE = set(string.ascii_letters + string.digits + "-_")
# Ids made for one request: enough that every position shows most of the 64 characters if the ids are random.
IDS = 2000


def test_stream_ids_come_from_secrets_with_128_bits_and_do_not_depend_on_the_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    registry = Registry()
    ids = [registry.create(RunSpec(tokens=5, seed=1)).stream_id for _ in range(IDS)]   # the same request each time
    assert len(set(ids)) == IDS
    assert all(len(i) == 22 and set(i) <= URLSAFE for i in ids)
    assert STREAM_ID_BYTES >= 16
    # Every position of the id varies, over the whole alphabet (a counter or a clock would not).
    for position in range(21):                  # the 22nd character carries only 2 of the 128 bits
        assert len({i[position] for i in ids}) > 48, position
    calls: list[int] = []
    monkeypatch.setattr(registry_module.secrets, "token_urlsafe", lambda n: calls.append(n) or "from-secrets")
    assert Registry().create(RunSpec(tokens=5)).stream_id == "from-secrets" and calls == [STREAM_ID_BYTES]


SLOWEST = "clock=real&tokens=277&reader_ms=100&producer_ms=100&buffer=1"


def test_the_budget_fits_the_serverless_limit_and_the_command_line_refuses_too(
        capsys: pytest.CaptureFixture[str]) -> None:
    from tokenwire.cli import main
    max_duration = json.loads((ROOT / "vercel.json").read_text())["functions"]["api/report.py"]["maxDuration"]
    assert REAL_BUDGET_MS / 1000 < max_duration
    argv = ["report", *(f"--{pair.replace('=', ' ')}" for pair in SLOWEST.split("&"))]
    assert main(" ".join(argv).split()) == 2
    assert "--clock real would take about" in capsys.readouterr().err


def test_the_live_page_writes_server_text_only_as_text() -> None:
    script = (ROOT / "tokenwire" / "live" / "static" / "live.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
    assert "textContent" in script
