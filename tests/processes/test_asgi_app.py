"""``uvicorn tokenwire.asgi:app``: the canned answer over a real uvicorn, read by httpx-sse, cut and resumed,
and the same status codes, errors and headers as ``tokenwire serve`` (run beside it in this process)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from support.asgi import Uvicorn, read_stream, uvicorn
from support.live import request, serving

from tokenwire.core.model import ANSWER
from tokenwire.live.server import LiveServer

HEADERS = ("content-type", "cache-control", "x-content-type-options", "referrer-policy", "allow", "retry-after",
           "x-accel-buffering")


@pytest.fixture(scope="module")
def asgi() -> Iterator[Uvicorn]:
    with uvicorn("tokenwire.asgi:app") as server:
        yield server


@pytest.fixture(scope="module")
def serve() -> Iterator[LiveServer]:
    with serving() as server:
        yield server


def test_httpx_sse_reads_the_whole_answer_exactly(asgi: Uvicorn) -> None:
    read = read_stream(f"{asgi.url}/stream?tokens=60&producer_ms=0.5")
    assert read.status == 200
    assert [e.event for e in read.events][0] == "open"
    assert read.ids == list(range(60))
    assert read.text == "".join(ANSWER[:60])
    assert read.last.event == "done" and read.last.id == "59"
    assert read.last_json() == {"tokens": 60, "delivered_from": 0, "dropped": 0}


@pytest.mark.parametrize("k", [1, 17, 69])
def test_a_cut_after_k_tokens_resumes_with_last_event_id_to_the_exact_text(asgi: Uvicorn, k: int) -> None:
    made = httpx.post(f"{asgi.url}/streams?tokens=70&producer_ms=0.5&cut_after={k}")
    assert made.status_code == 201
    url = asgi.url + made.json()["events_url"]
    first = read_stream(url)
    assert first.ids == list(range(k)) and all(e.event != "done" for e in first.events)
    second = read_stream(url, headers={"Last-Event-ID": first.tokens[-1].id})
    ids = first.ids + second.ids
    assert ids == list(range(70))                      # each index once, none missing
    assert first.text + second.text == "".join(ANSWER[:70])
    assert second.last.event == "done"
    assert json.loads(second.events[0].data)["resumed"] is True
    assert httpx.get(url, headers={"Last-Event-ID": "69"}).status_code == 204   # it has everything


def _finished(base: str, client: httpx.Client) -> str:
    made = client.post(f"{base}/streams?tokens=5&producer_ms=0.1")
    url = base + made.json()["events_url"]
    assert read_stream(url).ids == list(range(5))
    return made.json()["events_url"]


# (method, target, headers): each is asked of both servers; {finished} is an events URL of a finished stream.
CASES = [
    ("GET", "/stream?tokens=0", {}),
    ("GET", "/stream?scenario=nope", {}),
    ("GET", "/stream?tokens=5&tokens=6", {}),
    ("GET", "/stream?cut_after=5&tokens=5", {}),
    ("GET", "/stream?last_event_id=3", {}),
    ("GET", "/stream", {"Last-Event-ID": "3"}),
    ("POST", "/streams?last_event_id=1", {}),
    ("PUT", "/streams", {}),
    ("POST", "/stream", {}),
    ("DELETE", "/streams/abc/events", {}),
    ("GET", "/streams/unknownstream/events", {}),
    ("GET", "{finished}", {"Last-Event-ID": "007"}),
    ("GET", "{finished}", {"Last-Event-ID": "-1"}),
    ("GET", "{finished}", {"Last-Event-ID": "5"}),
    ("GET", "{finished}?last_event_id=99", {}),
    ("GET", "{finished}?tokens=3", {}),
    ("GET", "{finished}?cut_after=9", {}),
    ("GET", "{finished}", {"Last-Event-ID": "4"}),
    ("GET", "{finished}", {"Last-Event-ID": "+3"}),
    ("GET", "{finished}", {"Last-Event-ID": "x1"}),
    ("GET", "{finished}", {"Last-Event-ID": "9" * 10_000}),
    ("GET", "{finished}", {"Last-Event-ID": "\u0663".encode()}),        # non-ASCII, sent as UTF-8
    ("GET", "{finished}?last_event_id=1&last_event_id=2", {}),
    ("POST", "/streams?tokens=5", {"Transfer-Encoding": "chunked"}),
]


def test_every_refusal_has_the_status_message_and_headers_of_tokenwire_serve(asgi: Uvicorn,
                                                                              serve: LiveServer) -> None:
    with httpx.Client(timeout=10) as client:
        ours, theirs = _finished(asgi.url, client), _finished(serve.url, client)
        for method, target, headers in CASES:
            a = client.request(method, asgi.url + target.format(finished=ours), headers=headers)
            status, their_headers, body = request(serve, method, target.format(finished=theirs), headers)
            assert a.status_code == status, (method, target, a.text, body)
            if status != 204:
                assert a.content == body, (method, target)             # the same bytes: one message, one rule
            for name in HEADERS:
                assert a.headers.get(name) == their_headers.get(name), (method, target, name)


def test_the_event_stream_headers_are_those_of_tokenwire_serve(asgi: Uvicorn, serve: LiveServer) -> None:
    with httpx.Client(timeout=10) as client:
        with client.stream("GET", f"{asgi.url}/stream?tokens=3&producer_ms=0.1") as ours:
            ours.read()
        with client.stream("GET", f"{serve.url}/stream?tokens=3&producer_ms=0.1") as theirs:
            theirs.read()
    assert ours.status_code == theirs.status_code == 200
    for name in HEADERS:
        assert ours.headers.get(name) == theirs.headers.get(name), name


def test_bodies_unknown_methods_and_paths_are_refused_in_json(asgi: Uvicorn) -> None:
    with httpx.Client(timeout=10) as client:
        big = client.post(f"{asgi.url}/streams?tokens=5", content=b"x" * 1025)
        # Content-Length says it: refused before anything is read, with tokenwire serve's own words.
        assert (big.status_code, big.json()) == (413, {"error": "request body of 1025 bytes; at most 1024 are read"})
        chunked = client.post(f"{asgi.url}/streams?tokens=5", content=iter([b"a", b"b"]))
        assert chunked.status_code == 411
        assert chunked.json() == {"error": "send the parameters in the query string; chunked bodies are refused"}
        assert client.request("PATCH", f"{asgi.url}/nowhere").status_code == 404
        assert client.request("PROPFIND", f"{asgi.url}/stream").json() == {
            "error": "method 'PROPFIND' is not implemented here"}
    assert "Traceback" not in asgi.stderr()
