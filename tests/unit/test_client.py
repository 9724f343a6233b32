"""``tokenwire.client`` without a network: the reconnect state alone, then ``events``/``aevents`` over httpx's
``MockTransport`` (scripted answers: a cut body, a reset, a 503, a 404), with a recording ``sleep``.

Every wait is recorded, never slept; jitter is 0 or drawn from a fixed number, so each figure is exact.
"""

from __future__ import annotations

import ast
import asyncio
import sys
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import pytest
from support.docs import section
from support.requirements import ROOT

from tokenwire.cli import main
from tokenwire.client import (
    AttemptsExhausted,
    Backoff,
    Event,
    ProtocolError,
    Reconnect,
    StreamRefused,
    aevents,
    events,
)
from tokenwire.core.sse import Decoder

URL = "http://example.test/streams/abc/events"
NO_JITTER = Backoff(jitter=0)


def token(i: int, text: str = "x") -> bytes:
    return f"id: {i}\nevent: token\ndata: {text}\n\n".encode()


OPEN = b'retry: 750\nevent: open\ndata: {"stream_id": "abc"}\n\n'
DONE = b'id: 3\nevent: done\ndata: {"tokens": 4}\n\n'


# -- the decoder carries the last event ID and retry across connections ------------------------------------
def test_a_decoder_starts_from_a_last_event_id_and_retry() -> None:
    decoder = Decoder(last_event_id="7", retry=2000)
    assert (decoder.last_event_id, decoder.retry) == ("7", 2000)
    assert decoder.feed(b"event: open\ndata: {}\n\nid:\ndata: reset\n\n") == [
        Event("open", "{}", "7", 2000), Event("message", "reset", "", 2000)]


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"last_event_id": "1\n2"}, ValueError, "last_event_id must not contain CR or LF: '1\\n2'"),
    ({"last_event_id": "1\0"}, ValueError, "last_event_id must not contain NUL: '1\\x00'"),
    ({"last_event_id": 7}, TypeError, "last_event_id must be str, got int"),
    ({"retry": -1}, ValueError, "retry must be a non-negative int, got -1"),
    ({"retry": True}, ValueError, "retry must be a non-negative int, got True"),
])
def test_a_decoder_refuses_a_state_no_stream_could_set(kwargs: dict[str, object], error: type[Exception],
                                                       message: str) -> None:
    with pytest.raises(error) as raised:
        Decoder(**kwargs)  # type: ignore[arg-type]
    assert str(raised.value) == message


# -- the reconnect state ------------------------------------------------------------------------------------
def state(**kwargs: object) -> Reconnect:
    kwargs.setdefault("backoff", NO_JITTER)
    return Reconnect(URL, **kwargs)  # type: ignore[arg-type]


def connect(s: Reconnect, *chunks: bytes, drop: str | None = "closed") -> list[Event]:
    """One connection: a request, a 200, ``chunks``, then (unless the end came) a drop."""
    assert s.request() is not None
    s.opened("text/event-stream; charset=utf-8")
    got = [e for chunk in chunks for e in s.feed(chunk)]
    if drop is not None and not s.ended:
        s.dropped(drop)
    return got


def test_the_first_request_sends_no_last_event_id_and_waits_nothing() -> None:
    request = state(headers={"Authorization": "Bearer t"}).request()
    assert request is not None
    assert (request.url, request.wait_s, request.attempt) == (URL, 0.0, 1)
    assert request.headers == (("Accept", "text/event-stream"), ("Cache-Control", "no-cache"),
                               ("Authorization", "Bearer t"))


def test_the_callers_headers_replace_ours_of_the_same_name() -> None:
    request = state(headers={"accept": "text/event-stream, */*", "Last-Event-ID": "9"}, last_event_id="3").request()
    assert request is not None
    assert request.headers == (("Cache-Control", "no-cache"), ("accept", "text/event-stream, */*"),
                               ("Last-Event-ID", "9"))


def test_a_given_last_event_id_is_sent_from_the_first_request() -> None:
    request = state(last_event_id="41").request()
    assert request is not None and ("Last-Event-ID", "41") in request.headers


def test_after_a_drop_it_resumes_from_the_last_id_after_the_streams_retry() -> None:
    s = state()
    connect(s, b"retry: 2500\n" + OPEN[len(b"retry: 750\n"):], token(0), token(1), token(2)[:9])  # 2 cut in half
    request = s.request()
    assert request is not None
    assert ("Last-Event-ID", "1") in request.headers
    assert (request.wait_s, request.attempt, s.retry_ms) == (2.5, 1, 2500)


def test_without_retry_the_first_wait_is_the_backoffs_initial_one() -> None:
    s = state(backoff=Backoff(initial_s=0.3, jitter=0))
    connect(s, token(0))
    request = s.request()
    assert request is not None and request.wait_s == 0.3


def test_attempts_without_a_new_event_back_off_exponentially_up_to_the_bound() -> None:
    s = state(max_attempts=10, backoff=Backoff(initial_s=1, multiplier=2, max_s=5, jitter=0))
    connect(s, token(0))                        # progress: the count starts again
    waits = []
    for _ in range(6):
        connect(s, b": ping\n\n", OPEN[len(b"retry: 750\n"):])   # an open frame keeps the id: nothing new
        request = s.request()
        assert request is not None
        waits.append((request.wait_s, request.attempt))
    assert waits == [(2, 2), (4, 3), (5, 4), (5, 5), (5, 6), (5, 7)]


def test_jitter_only_adds_and_never_past_the_bound() -> None:
    for draw, expected in ((0.0, 0.75), (0.5, 0.75 * 1.25), (0.999999, 0.75 * 1.4999995)):
        s = state(backoff=Backoff(jitter=0.5, max_s=30), random=lambda draw=draw: draw)
        connect(s, OPEN, token(0))
        request = s.request()
        assert request is not None and request.wait_s == pytest.approx(expected)
    s = state(backoff=Backoff(initial_s=20, jitter=0.5, max_s=25), random=lambda: 0.9)
    connect(s, token(0))
    request = s.request()
    assert request is not None and request.wait_s == 25


def test_attempts_run_out_after_max_attempts_in_a_row_without_a_new_event() -> None:
    s = state(max_attempts=3)
    connect(s, OPEN, token(0))
    connect(s, OPEN)
    connect(s, OPEN, token(0))                   # the same id again is nothing new
    with pytest.raises(AttemptsExhausted) as raised:
        connect(s, drop="ReadError: reset")
    assert str(raised.value) == ("gave up on /streams/abc/events after 3 attempts in a row without a new event; "
                                 "the last: ReadError: reset")
    assert (raised.value.attempts, raised.value.path) == (3, "/streams/abc/events")


def test_a_connection_that_brings_a_new_event_starts_the_count_again() -> None:
    s = state(max_attempts=2)
    for i in range(20):                          # twenty drops, each after one new token: never gives up
        connect(s, OPEN, token(i))
        request = s.request()
        assert request is not None and request.attempt == 1
    assert s.last_event_id == "19"


@pytest.mark.parametrize("end", ["done", "failed", "error",
                                 "response.completed", "response.failed", "response.incomplete"])
def test_the_end_event_ends_the_stream_and_nothing_after_it_is_handed_out(end: str) -> None:
    s = state()
    got = connect(s, OPEN + token(0) + f"id: 0\nevent: {end}\ndata: {{}}\n\n".encode() + token(1))
    assert [e.event for e in got] == ["open", "token", end]
    assert s.ended and s.request() is None


CHAT = (b'id: 0\ndata: {"type":"start"}\n\n' b'id: 1\ndata: {"type":"text-delta","delta":"hi"}\n\n'
        b'id: 2\ndata: {"type":"finish"}\n\n' b'data: [DONE]\n\n')


def test_data_done_ends_a_chat_or_openai_stream() -> None:
    s = state(end_events=())
    got = connect(s, CHAT + token(3))
    assert [e.data for e in got][-1] == "[DONE]" and len(got) == 4
    assert s.ended and s.request() is None


def test_a_token_whose_text_is_done_is_a_token_not_the_end() -> None:
    s = state()
    got = connect(s, OPEN + token(0, "[DONE]") + token(1) + DONE)
    assert [e.event for e in got] == ["open", "token", "token", "done"] and s.ended


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_chat_stream_url_is_read_once_not_replayed_forever(kind: str) -> None:
    # GET /chat/<id>/stream?startIndex=0: the query's startIndex replays from 0 whatever Last-Event-ID says,
    # so before [DONE] ended it, every reconnect handed the same chunks out again, for ever.
    seen, handle = script(*(body(CHAT) for _ in range(3)))
    got, _ = run(kind, handle)
    assert len(seen) == 1 and [e.id for e in got] == ["0", "1", "2", "2"]


def test_end_events_can_be_chosen_for_another_server() -> None:
    s = state(end_events=())
    connect(s, DONE)
    assert not s.ended and s.request() is not None


def test_a_204_ends_the_stream() -> None:
    s = state()
    connect(s, OPEN, token(3))
    assert s.request() is not None
    s.answered(204, "No Content", None, b"")
    assert s.ended and s.request() is None


@pytest.mark.parametrize(("status", "body", "message"), [
    (404, b'{"error": "unknown stream \'abc\'"}',
     "/streams/abc/events answered 404 Not Found: unknown stream 'abc'"),
    (400, b'{"error": {"message": "bad cursor", "type": "invalid_request_error"}}',
     "/streams/abc/events answered 400 Bad Request: bad cursor"),
    (410, b"gone:\n  too old\n", "/streams/abc/events answered 410 Gone: gone: too old"),
    (403, b"", "/streams/abc/events answered 403 Forbidden"),
    (401, b"x" * 400, "/streams/abc/events answered 401 Unauthorized: " + "x" * 299 + "…"),
])
def test_a_4xx_raises_naming_the_path_the_status_and_the_servers_text(status: int, body: bytes,
                                                                      message: str) -> None:
    s = state()
    s.request()
    with pytest.raises(StreamRefused) as raised:
        s.answered(status, httpx.codes.get_reason_phrase(status), None, body)
    assert str(raised.value) == message
    assert (raised.value.status, raised.value.path) == (status, "/streams/abc/events")


@pytest.mark.parametrize(("status", "retry_after", "wait_s"), [
    (503, "5", 5.0), (503, None, 2.0), (500, "1", 2.0), (429, "3", 3.0), (408, None, 2.0),
    (503, "Wed, 21 Oct 2015 07:28:07 GMT", 7.0),        # an HTTP date: 7 s after the clock's now
    (503, "3600", 30.0),                                # never past the backoff's bound
    (503, "soon", 2.0),
])
def test_a_5xx_408_429_is_retried_after_retry_after(status: int, retry_after: str | None, wait_s: float) -> None:
    """The wait is the backoff's (1 s doubled: the attempt brought nothing) or ``Retry-After``, the longer."""
    s = state(clock=lambda: 1445412480.0)
    s.request()
    s.answered(status, "", retry_after, b'{"error": "busy"}')
    request = s.request()
    assert request is not None and (request.wait_s, request.attempt) == (wait_s, 2)


def test_a_retried_status_is_the_last_reason_when_attempts_run_out() -> None:
    s = state(max_attempts=1)
    s.request()
    with pytest.raises(AttemptsExhausted) as raised:
        s.answered(503, "Service Unavailable", "1", b'{"error": "too many open streams"}')
    assert str(raised.value) == ("gave up on /streams/abc/events after 1 attempts in a row without a new event; "
                                 "the last: /streams/abc/events answered 503 Service Unavailable: "
                                 "too many open streams")


def test_a_get_stream_resumes_at_the_events_url_its_open_event_names() -> None:
    s = Reconnect("http://h:8/canned/stream?tokens=9&cut_after=2", backoff=NO_JITTER)
    connect(s, b'event: open\ndata: {"stream_id": "a/b c"}\n\n', token(0))
    request = s.request()
    assert request is not None and request.url == "http://h:8/canned/streams/a%2Fb%20c/events"
    assert ("Last-Event-ID", "0") in request.headers


@pytest.mark.parametrize(("url", "data"), [
    ("http://h/events", '{"stream_id": "x"}'),          # not a .../stream URL
    ("http://h/stream", "not json"),
    ("http://h/stream", '["stream_id"]'),
    ("http://h/stream", '{"stream_id": 7}'),
])
def test_other_open_events_leave_the_url_alone(url: str, data: str) -> None:
    s = Reconnect(url)
    connect(s, f"event: open\ndata: {data}\n\n".encode())
    assert s.url == url


def test_an_answer_that_is_not_an_event_stream_is_a_protocol_error() -> None:
    s = state()
    s.request()
    with pytest.raises(ProtocolError) as raised:
        s.opened("application/json")
    assert str(raised.value) == ("/streams/abc/events answered 200 with Content-Type 'application/json', "
                                 "not text/event-stream")


def test_a_line_past_the_decoders_bound_is_a_protocol_error() -> None:
    s = state()
    s.request()
    s.opened("text/event-stream")
    with pytest.raises(ProtocolError) as raised:
        s.feed(b"data: " + b"x" * (1 << 20))
    assert str(raised.value) == ("/streams/abc/events: SSE line longer than max_line=1048576 characters "
                                 "(saw 1048582)")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"url": "ftp://h/x"}, "url must be an http:// or https:// URL, got 'ftp://h/x'"),
    ({"url": "http:///x"}, "url must be an http:// or https:// URL, got 'http:///x'"),
    ({"url": "http://[::1"}, "url must be an http:// or https:// URL, got 'http://[::1'"),         # was urlsplit's
    ({"url": "http://h:99999/x"}, "url must be an http:// or https:// URL, got 'http://h:99999/x'"),  # was tried
    ({"max_attempts": 0}, "max_attempts must be an int >= 1, got 0"),
    ({"max_attempts": True}, "max_attempts must be an int >= 1, got True"),
])
def test_bad_arguments_are_value_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        Reconnect(**{"url": URL, **kwargs})  # type: ignore[arg-type]
    assert str(raised.value) == message


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"initial_s": -1}, "initial_s must be a finite number >= 0, got -1"),
    ({"max_s": float("inf")}, "max_s must be a finite number >= 0, got inf"),
    ({"jitter": "0.5"}, "jitter must be a finite number >= 0, got '0.5'"),
    ({"multiplier": 0.5}, "multiplier must be a finite number >= 1, got 0.5"),
])
def test_a_bad_backoff_is_a_value_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        Backoff(**kwargs)  # type: ignore[arg-type]
    assert str(raised.value) == message


# -- events and aevents over a scripted transport ------------------------------------------------------------
class Cut(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body that gives ``chunks``, then fails with a reset (``reset``) or just ends."""

    def __init__(self, chunks: list[bytes], reset: bool) -> None:
        self.chunks, self.reset = chunks, reset

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        if self.reset:
            raise httpx.ReadError("[Errno 104] Connection reset by peer")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.__iter__():
            yield chunk


Answer = httpx.Response | Exception
SSE = {"content-type": "text/event-stream"}


def script(*answers: Answer) -> tuple[list[httpx.Request], Callable[[httpx.Request], httpx.Response]]:
    """A transport handler that gives ``answers`` in turn and records each request."""
    seen: list[httpx.Request] = []
    left = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = left.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return seen, handle


def body(*chunks: bytes, reset: bool = False) -> httpx.Response:
    return httpx.Response(200, headers=SSE, stream=Cut(list(chunks), reset))


def run(kind: str, handle: Callable[[httpx.Request], httpx.Response], url: str = URL,
        **kwargs: object) -> tuple[list[Event], list[float]]:
    """Read ``url`` with ``events`` (``sync``) or ``aevents`` (``async``); returns the events and the waits."""
    waits: list[float] = []
    kwargs.setdefault("backoff", NO_JITTER)
    if kind == "sync":
        with httpx.Client(transport=httpx.MockTransport(handle)) as client:
            return list(events(url, client=client, sleep=waits.append, **kwargs)), waits  # type: ignore[arg-type]

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def main() -> list[Event]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as client:
            return [e async for e in aevents(url, client=client, sleep=sleep, **kwargs)]  # type: ignore[arg-type]

    return asyncio.run(main()), waits


KINDS = ["sync", "async"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_cut_a_reset_and_a_503_are_resumed_with_last_event_id(kind: str) -> None:
    seen, handle = script(
        body(OPEN, token(0, "a"), token(1, "b")[:12]),                       # EOF in the middle of a frame
        httpx.ConnectError("[Errno 111] Connection refused"),
        httpx.Response(503, headers={"Retry-After": "4"}, json={"error": "busy"}),
        body(OPEN, token(1, "b"), reset=True),
        body(OPEN, token(2, "c"), DONE, token(9)),
    )
    got, waits = run(kind, handle)
    assert [(e.event, e.id, e.data) for e in got if e.event != "open"] == [
        ("token", "0", "a"), ("token", "1", "b"), ("token", "2", "c"), ("done", "3", '{"tokens": 4}')]
    assert [r.headers.get("last-event-id") for r in seen] == [None, "0", "0", "0", "1"]
    assert waits == [0.75, 1.5, 4.0, 0.75]                                  # retry, doubled, Retry-After, retry
    assert all(r.headers["accept"] == "text/event-stream" for r in seen)


@pytest.mark.parametrize("kind", KINDS)
def test_an_id_of_any_text_goes_back_as_utf8(kind: str) -> None:
    seen, handle = script(body("id: é1\ndata: x\n\n".encode()), body(DONE))
    run(kind, handle)
    assert seen[1].headers.raw[-1] == (b"Last-Event-ID", "é1".encode())


@pytest.mark.parametrize("kind", KINDS)
def test_a_404_raises_with_the_servers_message(kind: str) -> None:
    _, handle = script(body(OPEN, token(0)), httpx.Response(404, json={"error": "unknown stream 'abc'"}))
    with pytest.raises(StreamRefused) as raised:
        run(kind, handle)
    assert str(raised.value) == "/streams/abc/events answered 404 Not Found: unknown stream 'abc'"


@pytest.mark.parametrize("kind", KINDS)
def test_attempts_running_out_raise(kind: str) -> None:
    _, handle = script(*[httpx.ConnectError("[Errno 111] Connection refused")] * 3)
    with pytest.raises(AttemptsExhausted) as raised:
        run(kind, handle, max_attempts=3)
    assert str(raised.value) == ("gave up on /streams/abc/events after 3 attempts in a row without a new event; "
                                 "the last: ConnectError: [Errno 111] Connection refused")


@pytest.mark.parametrize("kind", KINDS)
def test_a_204_on_reconnect_ends_the_stream(kind: str) -> None:
    seen, handle = script(body(OPEN, token(3)), httpx.Response(204))
    got, _ = run(kind, handle)
    assert [e.event for e in got] == ["open", "token"] and len(seen) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_that_is_not_sse_is_a_protocol_error(kind: str) -> None:
    _, handle = script(httpx.Response(200, json={"choices": []}))
    with pytest.raises(ProtocolError):
        run(kind, handle)


def test_bad_arguments_raise_at_the_call_not_at_the_first_event() -> None:
    with pytest.raises(ValueError):
        events("nope")
    with pytest.raises(ValueError):
        aevents(URL, max_attempts=0)


@pytest.mark.parametrize(("ending", "said"), [
    ('{"tokens": 5, "stopped_early": true, "reason": "stopped"}',
     "tokenwire read: the stream ended early (stopped) after 5 tokens; what was printed is not the whole answer\n"),
    ('{"tokens": 2, "stopped_early": true, "reason": "lost"}',
     "tokenwire read: the stream ended early (lost) after 2 tokens; what was printed is not the whole answer\n"),
    ('{"tokens": 2, "delivered_from": 0, "dropped": 0}', ""),
])
def test_read_says_a_stream_that_ended_early_is_not_the_whole_answer(ending: str, said: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from tokenwire.client.command import read
    got = Decoder().feed(token(0, " a") + token(1, " b") + f"id: 1\nevent: done\ndata: {ending}\n\n".encode())
    assert read(iter(got), sys.stdout) == (1 if said else 0)
    assert capsys.readouterr() == (" a b", said)


def _chat(*chunks: str) -> bytes:
    preamble = ['{"type":"start"}', '{"type":"start-step"}', '{"type":"text-start","id":"text-0"}']
    deltas = ['{"type":"text-delta","id":"text-0","delta":" a"}', '{"type":"text-delta","id":"text-0","delta":" b"}']
    return b"".join(f"id: {n}\ndata: {c}\n\n".encode() for n, c in enumerate([*preamble, *deltas, *chunks]))


@pytest.mark.parametrize(("ending", "status", "said"), [
    (['{"type":"finish","finishReason":"stop"}'], 0, ""),
    (['{"type":"finish","finishReason":"other"}'], 1, "tokenwire read: the stream ended early (stopped or cancelled) "
                                                      "after 2 tokens; what was printed is not the whole answer\n"),
    (['{"type":"error","errorText":"the model raised RuntimeError"}', '{"type":"finish","finishReason":"error"}'],
     1, "tokenwire read: the stream failed: the model raised RuntimeError\n"),
])
def test_read_prints_a_chat_streams_text_and_tells_how_it_ended(ending: list[str], status: int, said: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from tokenwire.client.command import read
    got = Decoder().feed(_chat('{"type":"text-end","id":"text-0"}', *ending) + b"data: [DONE]\n\n")
    assert read(iter(got), sys.stdout) == status
    assert capsys.readouterr() == (" a b", said)


@pytest.mark.parametrize("kind", KINDS)
def test_each_retry_after_nothing_new_is_told_what_the_last_attempt_did(kind: str) -> None:
    _, handle = script(
        body(OPEN, token(0, "a")),                                             # moved on, then cut: no retry to tell
        httpx.ConnectError("[Errno 111] Connection refused"),
        httpx.Response(503, headers={"Retry-After": "4"}, json={"error": "busy"}),
        body(OPEN, token(1, "b"), DONE),
    )
    told: list[tuple[int, str, float]] = []
    got, _ = run(kind, handle, on_retry=lambda request: told.append((request.attempt, request.after, request.wait_s)))
    assert got[-1].event == "done"
    assert told == [(2, "ConnectError: [Errno 111] Connection refused", 1.5),
                    (3, "/streams/abc/events answered 503 Service Unavailable: busy", 4.0)]


@pytest.mark.parametrize("kind", KINDS)
def test_httpxs_text_is_told_without_the_urls_password(kind: str) -> None:
    """httpx may quote the URL it failed on: its message is told (retry, give-up) with the password as ***."""
    url = "http://alice:s3cret@example.test/streams/abc/events"
    _, handle = script(*[httpx.ConnectError(f"cannot connect to {url}")] * 2)
    told: list[str] = []
    with pytest.raises(AttemptsExhausted) as raised:
        run(kind, handle, url=url, max_attempts=2, on_retry=lambda request: told.append(request.after))
    said = "ConnectError: cannot connect to http://alice:***@example.test/streams/abc/events"
    assert (told, raised.value.reason) == ([said], said)


def test_a_failed_streams_message_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenwire.client.command import read
    failed = b'id: 0\nevent: failed\ndata: {"error": "the model raised\\n  ValueError: bad"}\n\n'
    assert read(iter(Decoder().feed(failed)), sys.stdout) == 1
    assert capsys.readouterr() == ("", "tokenwire read: the stream failed: the model raised ValueError: bad\n")


def test_the_reconnect_state_imports_no_io() -> None:
    tree = ast.parse((ROOT / "tokenwire" / "client" / "reconnect.py").read_text())
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    assert roots == {"__future__", "collections", "dataclasses", "email", "json", "math", "random", "time",
                     "urllib"}


def test_the_client_extra_is_httpx_and_the_readme_names_it() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["client"] == ["httpx>=0.27"]
    assert "pip install -e '.[client]'" in section("Reading a stream from Python")


READ_USAGE = [
    (["--max-attempts", "abc", URL], "tokenwire read: --max-attempts must be a whole number; got 'abc'"),
    (["--max-attempts", "0", URL], "tokenwire read: --max-attempts must be from 1 to 100; got '0'"),
    (["--max-attempts=0101", URL], "tokenwire read: --max-attempts must be from 1 to 100; got '0101'"),
    (["--max-attempts"], "tokenwire read: flag --max-attempts needs a value"),
    (["--header", "nocolon", URL], "tokenwire read: --header must look like 'Name: value'; got 'nocolon'"),
    (["--header", "Bad Name: x", URL],
     "tokenwire read: --header must look like 'Name: value'; got 'Bad Name:' and a value, not shown here"),
    (["--header", "Authorization Bearer sk-secret-1", URL],     # a credential is never echoed
     "tokenwire read: --header must look like 'Name: value'; got 'Authorization' and a value, not shown here"),
    (["--header", "Cookie : session=secret-2", URL],
     "tokenwire read: --header must look like 'Name: value'; got 'Cookie :' and a value, not shown here"),
    (["--bogus", URL], "tokenwire read: unknown flag '--bogus'; allowed: --header, --last-event-id, --max-attempts"),
    (["ftp://h/x"], "tokenwire read: URL must be an http:// or https:// URL; got 'ftp://h/x'"),
    # a URL's password is never echoed: not in a bad URL, one httpx cannot send, nor a stray argument
    (["http://alice:s3cret@127.0.0.1:99999/x"],
     "tokenwire read: URL must be an http:// or https:// URL; got 'http://alice:***@127.0.0.1:99999/x'"),
    (["http://alice:s3c/ret@127.0.0.1:9/x"],
     "tokenwire read: URL must be an http:// or https:// URL; got 'http://alice:***@127.0.0.1:9/x'"),
    (["http://alice:s3c\x01ret@127.0.0.1:9/x"],
     "tokenwire read: URL must be an http:// or https:// URL; got 'http://alice:***@127.0.0.1:9/x' "
     "(Invalid non-printable ASCII character in URL, '\\x01' at position 16.)"),
    ([URL, "http://alice:s3cret@h/y"],
     "tokenwire read: unexpected argument 'http://alice:***@h/y'; flags look like --name value (see --help)"),
    ([], "tokenwire read: the following arguments are required: URL (see --help)"),
]


@pytest.mark.parametrize(("argv", "line"), READ_USAGE, ids=[" ".join(a) or "nothing" for a, _ in READ_USAGE])
def test_a_bad_flag_of_read_is_one_line_naming_it_and_exit_2(argv: list[str], line: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["read", *argv]) == 2
    assert capsys.readouterr() == ("", line + "\n")
