"""Headless Chromium loads /live with cut_after: its EventSource reconnects by itself and completes the stream.

How the page's result is read: the page writes everything it observed (ids,
text, connections, the Last-Event-ID it carried) as JSON into
``<pre id="result">`` and sets ``<body data-state="done">`` when the done
frame arrives.  Chromium runs with ``--dump-dom`` and a virtual time budget:
virtual time does not advance while a network fetch (the open event stream)
is pending, and the reconnect's ``retry`` wait passes in virtual time, so the
DOM is dumped once the page has closed its EventSource on ``done`` or the
budget ran out.  No test-only endpoint, no DevTools protocol client.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

from conftest import require_binary
from live_helpers import serving

from tokenwire.core.model import ANSWER
from tokenwire.core.stream import Ending

CHROMIUM_TIMEOUT_S = 60
VIRTUAL_BUDGET_MS = 30_000
CUT_AFTER = 40


def dump_dom(url: str, profile: Path) -> str:
    exe = require_binary("chromium")
    done = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
         f"--virtual-time-budget={VIRTUAL_BUDGET_MS}", "--dump-dom", url],
        capture_output=True, timeout=CHROMIUM_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout.decode()


def test_chromium_eventsource_reconnects_with_last_event_id_and_completes(tmp_path: Path) -> None:
    with serving() as server:
        dom = dump_dom(f"{server.url}/live?tokens={len(ANSWER)}&cut_after={CUT_AFTER}", tmp_path / "profile")
        journal = list(server.journal)
    state = re.search(r'<body data-state="([a-z]+)"', dom)
    result = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert state is not None and result is not None, dom[:2000]
    seen = json.loads(html.unescape(result.group(1)))
    assert state.group(1) == "done", seen
    assert seen["errors"] == []
    assert seen["ids"] == list(range(len(ANSWER)))                     # exactly 0..N-1, so no duplicates
    assert seen["text"] == "".join(ANSWER)
    assert [c["resumed"] for c in seen["connections"]] == [False, True]
    assert seen["connections"][1] == {"resumed": True, "start_index": CUT_AFTER,
                                      "last_event_id_sent": str(CUT_AFTER - 1)}
    assert [j.ending for j in journal] == [Ending.CLOSED_BY_SERVER, Ending.DONE]
    assert journal[0].last_event_id_header is None
    assert journal[1].last_event_id_header == str(CUT_AFTER - 1)       # the browser sent the header itself
    assert journal[1].cursor == CUT_AFTER - 1
