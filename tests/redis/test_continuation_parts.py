"""Continuation with typed parts (``takeover="continue"``) on a real redis-server and two uvicorn processes: the
owner is SIGKILLed mid-answer.  A prefix that ends in reasoning is continued, the factory handed the logged
parts; one that ends inside a tool call's arguments, or after a call that awaits its result, is never continued:
the stream ends ``owner lost`` with every logged part kept for its readers."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, connect_sse
from support.apps.parts_continued import answer
from support.asgi import uvicorn
from support.redis import running_redis, until_logged

from tokenwire.core.parts import decode

APP = "support.apps.parts_continued:app"
# Far more than a continuation on loopback takes: the reader's one bound.
READ_TIMEOUT_S = 20


def _env(url: str, calls: Path) -> dict[str, str]:
    # A short lease, so that a dead owner is noticed within half a second.
    return {"TOKENWIRE_TEST_LOG": f"{url}?lease_ms=400&block_ms=50", "TOKENWIRE_TEST_CALLS": str(calls)}


def _calls(path: Path, stream_id: str) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [call for call in map(json.loads, lines) if call["stream_id"] == stream_id]


def _read(url: str, last_event_id: str | None = None, stop_after: int | None = None) -> list[ServerSentEvent]:
    """The events of ``url`` to its end (or ``stop_after`` numbered ones, then hang up)."""
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    events: list[ServerSentEvent] = []
    with httpx.Client(timeout=READ_TIMEOUT_S) as client, connect_sse(client, "GET", url, headers=headers) as source:
        assert source.response.status_code == 200
        for event in source.iter_sse():
            events.append(event)
            if stop_after is not None and sum(1 for e in events if e.id and e.event != "open") >= stop_after:
                break
    return events


def _parts(events: list[ServerSentEvent]) -> list[Any]:
    """The parts the numbered events carry: a token's text, any other part's JSON decoded."""
    return [e.data if e.event == "token" else decode("\x00" + e.data)
            for e in events if e.id and e.event not in ("open", "done", "failed")]


def _killed_then_read(shape: str, n: int, kill_after: int, tmp_path: Path,
                      logged: int | None = None) -> tuple[Any, list[ServerSentEvent], list[ServerSentEvent], Path]:
    """Make a ``shape`` stream on one process, read ``kill_after`` parts there, SIGKILL it once ``logged`` parts
    (default two more) are logged, and read the rest from the other process."""
    calls = tmp_path / "calls.jsonl"
    with running_redis() as redis_server:
        env = _env(redis_server.url, calls)
        with uvicorn(APP, env=env) as one, uvicorn(APP, env=env) as other:
            made = httpx.post(f"{one.url}/streams?shape={shape}&n={n}&delay_ms=30").json()
            first = _read(one.url + made["events_url"], stop_after=kill_after)
            until_logged(redis_server.url, made["stream_id"], logged or kill_after + 2)   # the owner logs on
            one.stop(signal.SIGKILL)                                             # then dies mid-answer
            rest = _read(other.url + made["events_url"], last_event_id=[e for e in first if e.id][-1].id)
    return made, first, rest, calls


def test_a_prefix_ending_in_reasoning_is_continued_and_the_factory_gets_its_parts(tmp_path: Path) -> None:
    made, first, rest, calls = _killed_then_read("reasoning", 60, 10, tmp_path)
    assert _parts(first) + _parts(rest) == answer("reasoning", 60)       # each part once, in order
    assert rest[-1].event == "done" and "stopped_early" not in rest[-1].data
    made_call, continued = _calls(calls, made["stream_id"])
    start = continued["start"]
    assert made_call["start"] == 0 and 10 <= start < 60
    assert continued["kinds"] == ["reasoning"] * start                    # the logged parts, as parts
    assert continued["reasoning"] == [f" r{i}" for i in range(start)] and continued["prefix_text"] == ""


def test_a_prefix_ending_inside_a_tool_calls_arguments_is_never_continued(tmp_path: Path) -> None:
    made, first, rest, calls = _killed_then_read("tool", 200, 6, tmp_path)
    got = _parts(first) + _parts(rest)
    assert got == answer("tool", 200)[:len(got)] and 6 < len(got) < 202   # every logged part, nothing made up
    assert rest[-1].event == "done" and json.loads(rest[-1].data)["reason"] == "owner lost"
    assert len(_calls(calls, made["stream_id"])) == 1                     # the factory never called again


def test_a_prefix_ending_after_a_call_that_awaits_its_result_is_never_continued(tmp_path: Path) -> None:
    made, first, rest, calls = _killed_then_read("awaiting", 200, 4, tmp_path, logged=4)    # the whole call
    assert _parts(first) + _parts(rest) == answer("awaiting", 200)        # the whole call, then the end
    assert rest[-1].event == "done" and json.loads(rest[-1].data)["reason"] == "owner lost"
    assert len(_calls(calls, made["stream_id"])) == 1
