"""Headless Chromium loads /live with cut_after: its EventSource reconnects by itself and completes the stream.

How the page's result is read: the page writes everything it observed (ids,
text, connections, the Last-Event-ID it carried) as JSON into
``<pre id="result">`` and sets ``<body data-state="done">`` when the done
frame arrives.  Chromium runs with ``--dump-dom`` and a virtual time budget:
virtual time does not advance while a network fetch (the open event stream)
is pending, and the reconnect's ``retry`` wait passes in virtual time, so the
DOM is dumped once the page has closed its EventSource on ``done`` or the
budget ran out.  No test-only endpoint, no DevTools protocol client.

A refused request is made here by a registry that refuses exactly once
where the real causes do (a token log that is down, a server at
``max_live``), so the page's own retries are seen deterministically: the
retry waits pass in virtual time.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from support.live import serving
from support.requirements import require_binary

from tokenwire.core.model import ANSWER
from tokenwire.core.pipeline import RunSpec
from tokenwire.core.stream import Ending
from tokenwire.core.tokenlog import LogUnavailable
from tokenwire.endpoints.config import RETRY_AFTER_S
from tokenwire.endpoints.registry import Busy, LiveStream, Registry

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


def page_result(dom: str) -> tuple[str, dict[str, Any]]:
    """The page's state (``body[data-state]``) and what it observed (``<pre id="result">``)."""
    state = re.search(r'<body data-state="([a-z]+)"', dom)
    result = re.search(r'<pre id="result"[^>]*>(.*?)</pre>', dom, re.S)
    assert state is not None and result is not None, dom[:2000]
    return state.group(1), json.loads(html.unescape(result.group(1)))


def test_chromium_eventsource_reconnects_with_last_event_id_and_completes(tmp_path: Path) -> None:
    with serving() as server:
        dom = dump_dom(f"{server.url}/live?tokens={len(ANSWER)}&cut_after={CUT_AFTER}", tmp_path / "profile")
        journal = list(server.journal)
    state, seen = page_result(dom)
    assert state == "done", seen
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


class RefusingOnce(Registry):
    """Refuses the first POST /streams as a down token log does and the second event-stream connection as a
    full server does (``Busy``): the server answers each with 503 and ``Retry-After``.  Requests here come one
    at a time, so the counts need no lock."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[str] = []
        self.admissions = 0

    def create(self, spec: RunSpec, *, cut_after: int | None = None) -> LiveStream:
        if "create" not in self.refused:
            self.refused.append("create")
            raise LogUnavailable("down for the first POST /streams (a test)")
        return super().create(spec, cut_after=cut_after)

    def open_slot(self) -> None:
        self.admissions += 1
        if self.admissions == 2:
            self.refused.append("events")
            raise Busy(self.max_live)
        super().open_slot()


def test_chromium_page_tries_a_refused_post_and_a_refused_reconnect_again_and_resumes_after_the_last_id(
        tmp_path: Path) -> None:
    registry = RefusingOnce()
    with serving(registry) as server:
        dom = dump_dom(f"{server.url}/live?tokens={len(ANSWER)}&cut_after={CUT_AFTER}", tmp_path / "profile")
        journal = list(server.journal)
    state, seen = page_result(dom)
    assert state == "done", seen
    assert seen["errors"] == []
    assert registry.refused == ["create", "events"]
    assert seen["retries"] == [
        {"what": "POST /streams", "status": 503, "wait_s": RETRY_AFTER_S, "try": 1, "last_event_id": None},
        # The browser's own reconnect (Last-Event-ID: 39) was refused; an EventSource does not retry that.
        {"what": "the events connection", "status": None, "wait_s": RETRY_AFTER_S, "try": 1,
         "last_event_id": str(CUT_AFTER - 1)},
    ]
    assert seen["ids"] == list(range(len(ANSWER)))                     # nothing repeated, nothing lost
    assert seen["text"] == "".join(ANSWER)
    assert [(c["resumed"], c["start_index"]) for c in seen["connections"]] == [(False, 0), (True, CUT_AFTER)]
    assert [j.ending for j in journal] == [Ending.CLOSED_BY_SERVER, Ending.DONE]
    assert journal[1].last_event_id_header is None                     # a new EventSource: the id is in the URL
    assert journal[1].last_event_id_query == str(CUT_AFTER - 1)
    assert journal[1].cursor == CUT_AFTER - 1
