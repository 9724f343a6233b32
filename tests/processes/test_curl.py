"""curl as a real client: `curl -N` on /stream, then a resume with `-H 'Last-Event-ID: k'`."""

from __future__ import annotations

import json
import subprocess

from support.live import serving
from support.requirements import require_binary

from tokenwire.core.model import ANSWER
from tokenwire.core.sse import Decoder

CURL_TIMEOUT_S = 20


def curl(*args: str) -> bytes:
    exe = require_binary("curl")
    done = subprocess.run([exe, "-sS", "-N", "--max-time", str(CURL_TIMEOUT_S), *args],
                          capture_output=True, timeout=CURL_TIMEOUT_S + 5, check=True)
    return done.stdout


def test_curl_streams_is_cut_and_resumes_with_last_event_id() -> None:
    with serving() as server:
        first = Decoder().feed(curl(f"{server.url}/stream?tokens=40&scenario=block&cut_after=17"))
        opened = json.loads(first[0].data)
        last = [e for e in first if e.event == "token"][-1].id
        events_url = f"{server.url}/streams/{opened['stream_id']}/events"
        second = Decoder().feed(curl("-H", f"Last-Event-ID: {last}", events_url))
        status = curl("-o", "/dev/null", "-w", "%{http_code}", "-H", "Last-Event-ID: 39",
                      f"{server.url}/streams/{opened['stream_id']}/events")
        journal = list(server.journal)
    ids = [int(e.id) for e in first + second if e.event == "token"]
    text = "".join(e.data for e in first + second if e.event == "token")
    assert first[0].event == "open" and opened["resumed"] is False
    assert last == "16" and first[-1].event == "token"
    assert second[0].event == "open" and json.loads(second[0].data)["start_index"] == 17
    assert second[-1].event == "done"
    assert ids == list(range(40)) and text == "".join(ANSWER[:40])
    assert status == b"204"
    assert journal[1].last_event_id_header == "16"


def test_curl_sees_the_sse_headers_and_a_400_for_a_bad_id() -> None:
    with serving() as server:
        head = curl("-D", "-", "-o", "/dev/null", f"{server.url}/stream?tokens=5").decode("latin-1").lower()
        created = json.loads(curl("-X", "POST", f"{server.url}/streams?tokens=5"))
        bad = curl("-w", "\n%{http_code}", "-H", "Last-Event-ID: 007", f"{server.url}{created['events_url']}")
    assert "content-type: text/event-stream; charset=utf-8" in head
    assert "cache-control: no-store" in head and "x-accel-buffering: no" in head
    assert "content-encoding" not in head
    assert all(line in ("server: tokenwire", "") for line in head.splitlines() if line.startswith("server:"))
    body, _, code = bad.rpartition(b"\n")
    assert code == b"400" and b"'007'" in body
