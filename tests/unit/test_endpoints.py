"""The live endpoints' decisions, without a socket: every refusal of the README's tables, the order in which
they are checked, 204 and the early endings, and the one heartbeat, for both servers at once (they only adapt
these decisions; ``tests/test_asgi_app.py`` checks the two edges answer byte for byte alike)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from tokenwire.core.clock import RealClock
from tokenwire.core.tokenlog import MemoryTokenLog, StreamState
from tokenwire.endpoints.config import LiveConfig
from tokenwire.endpoints.decide import Endpoints
from tokenwire.endpoints.decisions import Answer, LiveRequest, OpenStream
from tokenwire.endpoints.registry import Registry
from tokenwire.realtime import LoopDriver


def _request(method: str, target: str, headers: dict[str, str] | None = None, client: str = "127.0.0.1",
             root_path: str = "") -> LiveRequest:
    path, _, query = target.partition("?")
    fields = tuple((name.lower(), value) for name, value in (headers or {}).items())
    return LiveRequest(method, path, query, fields, client, root_path)


async def _no_body(limit: int) -> bytes:
    return b""


def _decide(endpoints: Endpoints, method: str, target: str, headers: dict[str, str] | None = None,
            body: Callable[[int], Any] = _no_body, **kw: Any) -> Answer | OpenStream | None:
    return asyncio.run(endpoints.decide(_request(method, target, headers, **kw), body))


def _endpoints(alone: bool = True, **limits: Any) -> Endpoints:
    log = limits.pop("log", None)
    return Endpoints(Registry(log, **limits), LiveConfig(), alone=alone)


def _error(decision: object) -> tuple[int, str]:
    assert isinstance(decision, Answer), decision
    assert ("Content-Type", "application/json") in decision.headers
    return decision.status, json.loads(decision.body)["error"]


def _finished(endpoints: Endpoints, tokens: int = 5) -> str:
    """A stream whose every token is logged (its producer run to the end without a reader)."""
    made = _decide(endpoints, "POST", f"/streams?tokens={tokens}&producer_ms=0.01")
    assert isinstance(made, Answer) and made.status == 201
    stream_id = json.loads(made.body)["stream_id"]
    live = endpoints.registry.get(stream_id)
    log = endpoints.registry.log
    for index, item in enumerate(live.stream.source.model.tokens):
        log.append(stream_id, index, item)
    log.set_state(stream_id, StreamState.DONE)
    return f"/streams/{stream_id}/events"


# (method, target, headers, status, message): every row of the README's resume and error tables that a
# default server can show; `{events}` is the events URL of a finished 5-token stream.
REFUSALS = [
    ("GET", "{events}", {"Last-Event-ID": "+3"}, 400, "Last-Event-ID must be a decimal integer"),
    ("GET", "{events}", {"Last-Event-ID": "03"}, 400, "Last-Event-ID must be a decimal integer"),
    ("GET", "{events}", {"Last-Event-ID": "x"}, 400, "Last-Event-ID must be a decimal integer"),
    ("GET", "{events}", {"Last-Event-ID": "9" * 10_000}, 400, "(10000 characters)"),
    ("GET", "{events}", {"Last-Event-ID": "\u0663"}, 400, "Last-Event-ID must be a decimal integer"),
    ("GET", "{events}", {"Last-Event-ID": "5"}, 400, "is past the end: this stream has ids 0..4"),
    ("GET", "{events}?last_event_id=1&last_event_id=2", {}, 400, "given more than once"),
    ("GET", "/stream", {"Last-Event-ID": "3"}, 400, "Last-Event-ID resumes a stream at /streams/<id>/events"),
    ("GET", "/stream?last_event_id=3", {}, 400, "last_event_id applies to /streams/<id>/events"),
    ("GET", "/stream?tokens=0", {}, 400, "tokens"),
    ("GET", "{events}?tokens=3", {}, 400, "an events URL takes only last_event_id and cut_after"),
    ("GET", "/streams/nosuchstream/events", {}, 404, "unknown stream 'nosuchstream'"),
    ("PUT", "/streams", {}, 405, "'/streams' does not take PUT; it takes POST"),
    ("POST", "/streams", {"Transfer-Encoding": "chunked"}, 411, "chunked bodies are refused"),
    ("PROPFIND", "/stream", {}, 501, "method 'PROPFIND' is not implemented here"),
    ("GET", "/nowhere", {}, 404, "no such path '/nowhere'"),
]


@pytest.mark.parametrize(("method", "target", "headers", "status", "message"), REFUSALS)
def test_every_refusal_names_what_is_wrong(method: str, target: str, headers: dict[str, str], status: int,
                                           message: str) -> None:
    endpoints = _endpoints()
    decision = _decide(endpoints, method, target.format(events=_finished(endpoints)), headers)
    got_status, got = _error(decision)
    assert (got_status, message in got) == (status, True), got


def test_a_server_with_pages_gets_none_for_paths_that_are_not_live_routes() -> None:
    assert _decide(_endpoints(alone=False), "GET", "/nowhere") is None
    assert _decide(_endpoints(alone=False), "GET", "/live") is None


def test_a_finished_stream_gets_204_only_with_its_last_id_and_a_plain_reconnect_replays_it() -> None:
    endpoints = _endpoints()
    events = _finished(endpoints)
    done = _decide(endpoints, "GET", events, {"Last-Event-ID": "4"})
    assert isinstance(done, Answer) and (done.status, done.body) == (204, b"")
    again = _decide(endpoints, "GET", events)
    assert isinstance(again, OpenStream) and again.cursor == -1
    endpoints.release(again)
    resumed = _decide(endpoints, "GET", events, {"Last-Event-ID": "2"})
    assert isinstance(resumed, OpenStream) and (resumed.cursor, resumed.header) == (2, "2")
    endpoints.release(resumed)
    assert endpoints.registry.live == 0


def test_204_goes_only_to_a_reader_of_a_stream_the_log_says_ended_normally() -> None:
    """Every token logged is not enough; a stream cancelled, stopped or failed (state
    cancelled), or still generating, replays its ending to a reader that has every token."""
    endpoints = _endpoints()
    events = _finished(endpoints)
    stream_id = events.split("/")[2]
    for state in (StreamState.CANCELLED, StreamState.GENERATING):
        endpoints.registry.log.set_state(stream_id, state)
        opened = _decide(endpoints, "GET", events, {"Last-Event-ID": "4"})
        assert isinstance(opened, OpenStream) and opened.cursor == 4, (state, opened)
        endpoints.release(opened)
    endpoints.registry.log.set_state(stream_id, StreamState.DONE)
    done = _decide(endpoints, "GET", events, {"Last-Event-ID": "4"})
    assert isinstance(done, Answer) and done.status == 204


def test_an_empty_header_says_nothing_and_the_query_id_counts() -> None:
    endpoints = _endpoints()
    events = _finished(endpoints)
    opened = _decide(endpoints, "GET", events + "?last_event_id=1", {"Last-Event-ID": " "})
    assert isinstance(opened, OpenStream) and (opened.cursor, opened.query_id) == (1, "1")


def test_a_full_server_refuses_before_it_makes_a_stream_and_a_released_slot_is_free_again() -> None:
    endpoints = _endpoints(max_live=1)
    first = _decide(endpoints, "GET", "/stream?tokens=5")
    assert isinstance(first, OpenStream)
    made = len(endpoints.registry)
    status, message = _error(_decide(endpoints, "GET", "/stream?tokens=5"))
    assert (status, message) == (503, "too many open streams: this server holds at most 1")
    assert len(endpoints.registry) == made                     # no stream was made for the 503
    endpoints.release(first)
    assert isinstance(_decide(endpoints, "GET", "/stream?tokens=5"), OpenStream)


def test_a_client_past_its_creation_allowance_gets_429_and_others_do_not() -> None:
    endpoints = _endpoints(create_burst=2, create_rate=0.001)
    for _ in range(2):
        assert _decide(endpoints, "POST", "/streams?tokens=5").status == 201  # type: ignore[union-attr]
    answer = _decide(endpoints, "POST", "/streams?tokens=5")
    assert isinstance(answer, Answer) and answer.status == 429
    assert ("Retry-After", "1000") in answer.headers
    assert _decide(endpoints, "POST", "/streams?tokens=5", client="10.0.0.2").status == 201  # type: ignore[union-attr]


def test_a_cursor_older_than_the_log_keeps_is_410() -> None:
    clock = RealClock()
    endpoints = _endpoints(log=MemoryTokenLog(clock.now, max_tokens=2), clock=clock)
    events = _finished(endpoints)
    status, message = _error(_decide(endpoints, "GET", events, {"Last-Event-ID": "0"}))
    assert status == 410 and "the log keeps indices from 3 on" in message


def test_the_body_is_read_after_the_query_is_checked_and_its_refusal_is_the_servers() -> None:
    endpoints, read = _endpoints(), []

    async def body(limit: int) -> bytes:
        read.append(limit)
        return b""
    assert _error(_decide(endpoints, "POST", "/streams?tokens=0", body=body))[0] == 400
    assert read == []                                           # a bad query is refused before the body is read
    made = _decide(endpoints, "POST", "/streams?tokens=5", body=body, root_path="/mount")
    assert isinstance(made, Answer) and made.status == 201 and read == [1024]     # read to the route's limit
    assert json.loads(made.body)["events_url"].startswith("/mount/streams/")


class _Wire:
    """An event wire in memory that takes every frame at once."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.failure: str | None = None
        self.bytes_sent = 0
        self.ended = asyncio.Event()

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool:
        self.frames.append(frame)
        self.bytes_sent += len(frame)
        return True

    def snapshot(self) -> tuple[int, int]:
        return self.bytes_sent, sum(b"event: token" in f for f in self.frames)

    def end(self) -> None:
        self.ended.set()


def test_a_silent_stream_gets_the_heartbeat_and_the_whole_answer_then_the_slot_back() -> None:
    async def main() -> tuple[_Wire, Endpoints]:
        registry = Registry()
        endpoints = Endpoints(registry, LiveConfig(heartbeat_s=0.02))
        registry.driver = LoopDriver(asyncio.get_running_loop(), registry.clock, spawn_hook=registry.spawn)
        # a slow model: 3 tokens at 100 ms each, so the writer waits past several heartbeats
        opened = await endpoints.decide(_request("GET", "/stream?tokens=3&producer_ms=100"), _no_body)
        assert isinstance(opened, OpenStream)
        wire = _Wire()
        endpoints.write(opened, wire)
        await asyncio.wait_for(wire.ended.wait(), 10)
        return wire, endpoints
    wire, endpoints = asyncio.run(main())
    assert wire.frames.count(b": ping\n") >= 2                  # one comment line, no blank line after it
    assert all(f == b": ping\n" or f.endswith(b"\n\n") for f in wire.frames)
    assert [f for f in wire.frames if b"event: token" in f][-1].startswith(b"id: 2\n")
    assert b"event: done" in wire.frames[-1]
    assert endpoints.registry.live == 0
    (entry,) = endpoints.journal
    assert (entry.ending.value, entry.tokens_sent, entry.bytes_sent) == ("done", 3, wire.bytes_sent)


def _token_ids(wire: _Wire) -> list[int]:
    return [int(f.split(b"\n")[0][4:]) for f in wire.frames if b"event: token" in f]


def test_max_duration_ends_each_connection_after_a_frame_and_the_stream_goes_on_for_the_resume() -> None:
    async def main() -> tuple[list[_Wire], Endpoints]:
        registry = Registry()
        endpoints = Endpoints(registry, LiveConfig(max_duration_s=0.15))
        registry.driver = LoopDriver(asyncio.get_running_loop(), registry.clock, spawn_hook=registry.spawn)
        # 12 tokens at 50 ms (the canned answer cancels when its reader leaves): longer than a connection may last
        opened = await endpoints.decide(_request("GET", "/stream?tokens=12&producer_ms=50"), _no_body)
        wires: list[_Wire] = []
        while isinstance(opened, OpenStream) and len(wires) < 40:
            wire = _Wire()
            wires.append(wire)
            endpoints.write(opened, wire)
            await asyncio.wait_for(wire.ended.wait(), 10)
            last = max([-1, *(i for w in wires for i in _token_ids(w))])
            headers = {"Last-Event-ID": str(last)} if last >= 0 else {}
            opened = await endpoints.decide(_request("GET", f"/streams/{wire_stream(opened)}/events", headers),
                                            _no_body)
        return wires, endpoints
    wires, endpoints = asyncio.run(main())
    assert len(wires) >= 3                                          # cut at least twice
    assert all(w.frames[0].startswith(b"retry: ") for w in wires)   # each reader was told how soon to come back
    assert [i for w in wires for i in _token_ids(w)] == list(range(12))   # every index once
    assert b"event: done" in wires[-1].frames[-1] and not any(b"event: done" in f for w in wires[:-1] for f in w.frames)
    assert {entry.ending.value for entry in list(endpoints.journal)[:-1]} == {"closed"}


def wire_stream(opened: OpenStream) -> str:
    return opened.live.stream_id


def test_a_body_declared_past_the_limit_is_refused_before_the_query_is_read() -> None:
    """The same 413 as ``tokenwire serve``'s HTTP layer gives, and before a bad query's 400."""
    endpoints = _endpoints()
    status, message = _error(_decide(endpoints, "POST", "/streams?bogus=1", {"Content-Length": "100000"}))
    assert (status, message) == (413, "request body of 100000 bytes; at most 1024 are read")


def test_a_stream_opened_after_the_shutdown_closed_the_others_ends_too() -> None:
    async def main() -> Endpoints:
        registry = Registry()
        endpoints = Endpoints(registry, LiveConfig())
        registry.driver = LoopDriver(asyncio.get_running_loop(), registry.clock, spawn_hook=registry.spawn)
        assert endpoints.close_streams() == 0                # the shutdown: nothing open yet
        opened = await endpoints.decide(_request("GET", "/stream?tokens=200&producer_ms=50"), _no_body)
        assert isinstance(opened, OpenStream)
        wire = _Wire()
        endpoints.write(opened, wire)
        await asyncio.wait_for(wire.ended.wait(), 5)         # not the 10 s the answer would take
        return endpoints
    endpoints = asyncio.run(main())
    assert [entry.ending.value for entry in endpoints.journal] == ["closed"]
    assert endpoints.registry.live == 0 and not endpoints.writing


@pytest.mark.parametrize("sndbuf", [0, -1, 2**31, True, 1.5])
def test_a_bad_send_buffer_size_is_refused_where_it_is_set(sndbuf: object) -> None:
    with pytest.raises(ValueError, match=r"sndbuf must be None or a positive int"):
        LiveConfig(sndbuf=sndbuf)  # type: ignore[arg-type]


@pytest.mark.parametrize(("target", "body", "delta"), [
    ("/chat", {"id": "chat-1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
               "tokens": 4, "producer_ms": 1}, b'"type":"text-delta"'),
    ("/v1/chat/completions", {"model": "tokenwire-canned", "stream": True,
                              "messages": [{"role": "user", "content": "hi"}]}, b'"delta":{"content":'),
    ("/v1/responses", {"model": "tokenwire-canned", "stream": True, "input": "hi"},
     b"event: response.output_text.delta\n"),
])
def test_the_connection_log_counts_the_entries_written_in_every_dialect(target: str, body: dict[str, Any],
                                                                         delta: bytes) -> None:
    """A connection's log counts the entries its writer wrote whole, whatever frames the dialect makes of each
    (none of these has tokenwire's ``event: token`` line)."""
    async def main() -> tuple[_Wire, Endpoints]:
        registry = Registry()
        endpoints = Endpoints(registry, LiveConfig())
        registry.driver = LoopDriver(asyncio.get_running_loop(), registry.clock, spawn_hook=registry.spawn)

        async def read(limit: int) -> bytes:
            return json.dumps(body).encode()
        opened = await endpoints.decide(_request("POST", target, {"content-type": "application/json"}), read)
        assert isinstance(opened, OpenStream), opened
        wire = _Wire()
        endpoints.write(opened, wire)
        await asyncio.wait_for(wire.ended.wait(), 10)
        return wire, endpoints
    wire, endpoints = asyncio.run(main())
    assert not any(b"event: token" in f for f in wire.frames)
    (entry,) = endpoints.journal
    deltas = sum(f.count(delta) for f in wire.frames)
    assert entry.ending.value == "done" and entry.tokens_sent == deltas > 0, (entry, deltas, wire.frames[:4])
