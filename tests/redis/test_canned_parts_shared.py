"""The canned answer with parts (``?parts=tools``) on two ``tokenwire serve`` instances sharing one redis-server: a
stream made on one and cut in the tool call's arguments is resumed on the other to every part, once, in order (the
other instance rebuilds it from the spec the log keeps, parts included, and finds the log's length its own)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, connect_sse
from support.instances import Instance

from tokenwire.core.model import canned_entries
from tokenwire.core.parts import decode

# Far more than a 41-part answer at 20 ms a step takes.
TIMEOUT_S = 20
QUERY = "parts=tools&tokens=5&producer_ms=20"


def _read(url: str, last_event_id: str | None = None, stop_after: int | None = None) -> list[ServerSentEvent]:
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    events: list[ServerSentEvent] = []
    with httpx.Client(timeout=TIMEOUT_S) as client, connect_sse(client, "GET", url, headers=headers) as source:
        assert source.response.status_code == 200, source.response.read()
        for event in source.iter_sse():
            events.append(event)
            if stop_after is not None and len([e for e in events if e.event not in ("open", "done")]) >= stop_after:
                break
    return events


def _parts(events: list[ServerSentEvent]) -> list[Any]:
    return [e.data if e.event == "token" else decode("\x00" + e.data) for e in events
            if e.event not in ("open", "done")]


def test_a_stream_with_parts_made_on_one_instance_is_resumed_on_the_other(redis_session: Any) -> None:
    one, other = Instance(redis_session.url, "one"), Instance(redis_session.url, "other")
    try:
        made = httpx.post(f"http://127.0.0.1:{one.port}/streams?{QUERY}", timeout=TIMEOUT_S).json()
        first = _read(f"http://127.0.0.1:{one.port}{made['events_url']}", stop_after=14)
        rest = _read(f"http://127.0.0.1:{other.port}{made['events_url']}", last_event_id=first[-1].id)
    finally:
        one.kill()
        other.kill()
    assert first[-1].id == "13" and first[-1].event == "tool-call-delta"         # cut in the call's arguments
    assert _parts(first) + _parts(rest) == [decode(entry) for entry in canned_entries(5, "tools")]
    assert rest[-1].event == "done" and json.loads(rest[-1].data)["tokens"] == 41
