"""One HTTP rule on both servers: a declared body length of any number of digits, and
percent-encoded paths.  ``tokenwire serve`` on both event loops; uvicorn with each of its HTTP parsers."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from support.asgi import Uvicorn, read_stream, uvicorn
from support.live import declared, raw, read_to_end, serving, split_response

from tokenwire.endpoints.routes import LIVE_ROUTES

# A declared length and the 413's message: 10 digits (past what was checked before), 19 (under 2**64),
# 20 and 100 (past any parser's integer).
DECLARED = {
    "10 digits": ("1000000000", "request body of 1000000000 bytes; at most 1024 are read"),
    "19 digits": ("9" * 19, f"request body of {'9' * 19} bytes; at most 1024 are read"),
    "20 digits": ("9" * 20, f"request body of {'9' * 20} bytes; at most 1024 are read"),
    "100 digits": ("0" * 5 + "9" * 100, "request body of a 100-digit number of bytes; at most 1024 are read"),
}
MALFORMED = ["12a", "-1", "1 2", "0x10"]


@pytest.fixture(scope="module", params=["httptools", "h11"])
def asgi(request: pytest.FixtureRequest) -> Iterator[Uvicorn]:
    with uvicorn("tokenwire.asgi:app", http=request.param) as server:
        yield server


def _raw_uvicorn(server: Uvicorn, data: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(data)
        return split_response(read_to_end(sock, 10))


@pytest.mark.parametrize("case", DECLARED)
def test_serve_refuses_a_declared_length_of_any_digits_with_413_before_reading(loop_kind: str, case: str) -> None:
    length, message = DECLARED[case]
    with serving() as server:
        status, headers, body = split_response(raw(server, declared("POST", "/streams?tokens=3", length)))
    assert (status, json.loads(body)) == (413, {"error": message})
    assert headers["content-type"] == "application/json"


@pytest.mark.parametrize("case", DECLARED)
def test_uvicorn_refuses_a_declared_length_of_any_digits_before_reading(asgi: Uvicorn, case: str) -> None:
    length, message = DECLARED[case]
    status, _, body = _raw_uvicorn(asgi, declared("POST", "/streams?tokens=3", length))
    if int(length) >= 2**64 if asgi.http == "httptools" else len(length) > 20:
        assert status == 400             # past what uvicorn's parser holds: it refuses first (README)
    else:
        assert (status, json.loads(body)) == (413, {"error": message})


@pytest.mark.parametrize("value", MALFORMED)
def test_a_malformed_content_length_is_400_on_both_servers(loop_kind: str, asgi: Uvicorn, value: str) -> None:
    with serving() as server:
        status, _, body = split_response(raw(server, declared("POST", "/streams?tokens=3", value)))
    assert (status, json.loads(body)) == (400, {"error": f"Content-Length {value!r} is not a number of bytes"})
    assert _raw_uvicorn(asgi, declared("POST", "/streams?tokens=3", value))[0] == 400   # the server's parser


# (method, target, the 400's message): paths with two spellings; {id} is a finished stream's id.
TWO_SPELLINGS = [
    ("GET", "/strea%6D?tokens=3", "the path '/strea%6D' percent-encodes 'm' as '%6D'; send it as itself"),
    ("GET", "/streams/{id}%2Fevents", "the path '/streams/{id}%2Fevents' percent-encodes '/' as '%2F'; "
                                      "send it as itself"),
    ("GET", "/streams/{id}%2fevents", "the path '/streams/{id}%2fevents' percent-encodes '/' as '%2f'; "
                                      "send it as itself"),
    ("GET", "/streams/{id}/even%74s", "the path '/streams/{id}/even%74s' percent-encodes 't' as '%74'; "
                                      "send it as itself"),
    ("POST", "/%73treams?tokens=3", "the path '/%73treams' percent-encodes 's' as '%73'; send it as itself"),
    ("GET", "/stream%7E", "the path '/stream%7E' percent-encodes '~' as '%7E'; send it as itself"),
    ("PUT", "/%2Fstream", "the path '/%2Fstream' percent-encodes '/' as '%2F'; send it as itself"),
]


def _finished(base: str) -> str:
    made = httpx.post(f"{base}/streams?tokens=3&producer_ms=0.1")
    stream_id = str(made.json()["stream_id"])
    assert read_stream(f"{base}/streams/{stream_id}/events").ids == [0, 1, 2]
    return stream_id


def test_a_path_with_two_spellings_is_refused_alike_by_both_servers(loop_kind: str, asgi: Uvicorn) -> None:
    with serving() as server, httpx.Client(timeout=10) as client:
        ours, theirs = _finished(asgi.url), _finished(server.url)
        for method, target, message in TWO_SPELLINGS:
            a = _raw_uvicorn(asgi, f"{method} {target.format(id=ours)} HTTP/1.1\r\nHost: x\r\nConnection: close"
                                   f"\r\nContent-Length: 0\r\n\r\n".encode())
            b = client.request(method, server.url + target.format(id=theirs))
            assert (a[0], json.loads(a[2])) == (400, {"error": message.format(id=ours)}), (asgi.http, target)
            assert (b.status_code, b.json()) == (400, {"error": message.format(id=theirs)}), target
            assert a[1]["content-type"] == b.headers["content-type"] == "application/json"


def test_a_path_decoded_once_routes_alike_on_both_servers(loop_kind: str, asgi: Uvicorn) -> None:
    """Other escapes are decoded once, then routed: ``%2541`` is ``%41``, never ``A``."""
    with serving() as server, httpx.Client(timeout=10) as client:
        for base in (asgi.url, server.url):
            read = read_stream(f"{base}/stream?tokens=2&producer_ms=0.1")       # the plain spelling is served
            assert read.ids == [0, 1]
        a = client.get(f"{asgi.url}/streams/x%2541/events")
        assert (a.status_code, a.json()) == (404, {"error": "no such path '/streams/x%41/events': the routes here "
                                                            f"are {LIVE_ROUTES.described()}"})


def test_serve_answers_expect_100_continue_on_a_body_route_before_the_body(loop_kind: str) -> None:
    # It sent nothing until the body came: a client that waits for the 100 (curl waits a second) stalled.
    body = json.dumps({"messages": [], "tokens": 2, "producer_ms": 0.01}).encode()
    with serving() as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"POST /chat HTTP/1.1\r\nHost: x\r\nConnection: close\r\nExpect: 100-continue\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"      # before any byte of the body is sent
        sock.sendall(body)
        status, headers, answer = split_response(read_to_end(sock, 10))
    assert status == 200 and headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert answer.endswith(b"data: [DONE]\n\n")


# Routes that read no body, each with its error format: (method, target, format); {id} is a finished stream's.
BODILESS = [
    ("GET", "/streams/{id}/events", "tokenwire"),
    ("GET", "/metrics", "tokenwire"),
    ("POST", "/streams/{id}/stop", "tokenwire"),
    ("GET", "/chat/{id}/stream", "tokenwire"),
    ("GET", "/v1/models", "openai"),
    ("GET", "/v1/responses/{id}", "openai"),
    ("GET", "/streams?tokens=3", "tokenwire"),        # a 405 (POST only): still the route's format
    ("GET", "/live", "text"),                         # the server's own pages: plain text
    ("GET", "/?scenario=block", "text"),
]


def _error(body: bytes, headers: dict[str, str], kind: str, status: int) -> str:
    """The message of an error answer in ``kind`` (``tokenwire``, ``openai`` or ``text``) format, checked whole."""
    if kind == "text":
        assert headers["content-type"] == "text/plain; charset=utf-8"
        text = body.decode()
        assert text.startswith(f"{status} ") and text.endswith("\n")
        return text[len(f"{status} "):-1]
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    if kind == "openai":
        assert set(error) == {"message", "type", "code"}
        return str(error["message"])
    return str(error)


def _head(method: str, target: str, *lines: str) -> bytes:
    return "\r\n".join([f"{method} {target} HTTP/1.1", "Host: x", "Connection: close", *lines, "", ""]).encode()


@pytest.mark.parametrize("value", [*MALFORMED, "5, 5", "abc"])
def test_serve_refuses_a_malformed_content_length_on_a_bodiless_route_in_its_own_format(loop_kind: str,
                                                                                        value: str) -> None:
    """It was h11's plain-text ``400 bad request: bad Content-Length`` (naming nothing) on every route but a body's."""
    with serving() as server:
        stream_id = _finished(server.url)
        for method, target, kind in BODILESS:
            status, headers, body = split_response(raw(server, declared(method, target.format(id=stream_id), value)))
            assert status == 400, (target, body)
            assert _error(body, headers, kind, 400) == f"Content-Length {value!r} is not a number of bytes", target


def test_serve_refuses_two_different_content_lengths_in_the_routes_own_format(loop_kind: str) -> None:
    """Each within the limit: a body route's check passed them, and h11 refused them in plain text."""
    message = "Content-Length given 2 times, as '5' and '6'; send it once"
    with serving() as server:
        stream_id = _finished(server.url)
        for method, target, kind in [*BODILESS, ("POST", "/streams?tokens=3", "tokenwire"),
                                     ("POST", "/v1/responses", "openai")]:
            answer = raw(server, _head(method, target.format(id=stream_id), "Content-Length: 5", "Content-Length: 6"))
            status, headers, body = split_response(answer)
            assert (status, _error(body, headers, kind, 400)) == (400, message), target


def test_serve_answers_a_bodiless_route_past_its_parsers_length_or_coding_in_the_routes_format(loop_kind: str) -> None:
    """A length past 20 digits (h11's bound) is 413, a transfer coding h11 does not decode 501, each named."""
    with serving() as server:
        stream_id = _finished(server.url)
        for method, target, kind in BODILESS:
            target = target.format(id=stream_id)
            status, headers, body = split_response(raw(server, declared(method, target, "9" * 21)))
            assert (status, _error(body, headers, kind, 413)) == (
                413, "request body of a 21-digit number of bytes; this server reads a Content-Length of at most "
                     "20 digits"), target
            status, headers, body = split_response(raw(server, _head(method, target, "Transfer-Encoding: gzip")))
            assert (status, _error(body, headers, kind, 501)) == (
                501, "Transfer-Encoding 'gzip' is not supported; send a body chunked or with its "
                     "Content-Length"), target
        # a length h11 holds is no fault on a route that ignores the body
        assert split_response(raw(server, declared("GET", "/metrics", "9" * 20)))[0] == 200


def test_what_the_http_layer_refuses_on_a_live_route_is_in_the_routes_format(loop_kind: str) -> None:
    """HTTP/1.1 without ``Host`` (h11's 400) and an unknown method (501): JSON on a live route, text on a page."""
    with serving() as server:
        for target, kind in (("/metrics", "tokenwire"), ("/v1/models", "openai"), ("/live", "text")):
            status, headers, body = split_response(raw(server, f"GET {target} HTTP/1.1\r\n\r\n".encode()))
            assert (status, _error(body, headers, kind, 400)) == (400, "bad request: Missing mandatory Host: header")
            status, headers, body = split_response(raw(server, _head("PROPFIND", target)))
            assert (status, _error(body, headers, kind, 501)) == (501, "method 'PROPFIND' is not implemented here")


@pytest.mark.parametrize("value", MALFORMED)
def test_uvicorn_refuses_a_malformed_content_length_on_any_route_itself(asgi: Uvicorn, value: str) -> None:
    """The accepted limit (docs/serving.md): uvicorn's parser answers before the app, in its own plain text."""
    for method, target, _ in BODILESS[:6]:
        status, headers, body = _raw_uvicorn(asgi, declared(method, target.format(id="x"), value))
        assert (status, headers["content-type"], body) == (400, "text/plain; charset=utf-8",
                                                           b"Invalid HTTP request received."), target


# Routes that read a body, each with its error format, and the 411 its route answers a chunked body.
BODY_ROUTES = [
    ("/streams?tokens=3", "tokenwire", "send the parameters in the query string; chunked bodies are refused"),
    ("/chat", "tokenwire", "send the body with its Content-Length; chunked bodies are refused"),
    ("/v1/chat/completions", "openai", "send the body with its Content-Length; chunked bodies are refused"),
    ("/v1/responses", "openai", "send the body with its Content-Length; chunked bodies are refused"),
]
# (the Transfer-Encoding lines, the 501's value): codings other than chunked alone
OTHER_CODINGS = [(("gzip",), "'gzip'"), (("gzip, chunked",), "'gzip, chunked'"),
                 (("chunked", "chunked"), "'chunked, chunked'")]
TE_AND_CL = "Transfer-Encoding 'chunked' and Content-Length '5' both given; send one of them"


def test_serve_judges_a_transfer_encoding_by_one_rule_on_every_route(loop_kind: str) -> None:
    """RFC 9112 §6.1, §6.3: any coding but chunked is 501 naming it, a Transfer-Encoding with a Content-Length 400
    naming both, each closing the connection.  A body route answered 411 to both (``send the body with its
    Content-Length`` to a request that sent one), and a route that reads no body 200 to the second."""
    with serving() as server:
        stream_id = _finished(server.url)
        routes = [*(("POST", target, kind, "the body") for target, kind, _ in BODY_ROUTES),
                  *((method, target, kind, "a body chunked or") for method, target, kind in BODILESS)]
        for method, target, kind, send in routes:
            target = target.format(id=stream_id)
            for lines, value in OTHER_CODINGS:
                head = _head(method, target, *(f"Transfer-Encoding: {line}" for line in lines))
                status, headers, body = split_response(raw(server, head + b"0\r\n\r\n"))
                assert (status, _error(body, headers, kind, 501)) == (
                    501, f"Transfer-Encoding {value} is not supported; send {send} with its Content-Length"), target
                assert headers["connection"] == "close"
            head = _head(method, target, "Transfer-Encoding: chunked", "Content-Length: 5")
            status, headers, body = split_response(raw(server, head + b"0\r\n\r\n"))
            assert (status, _error(body, headers, kind, 400)) == (400, TE_AND_CL), target
            assert headers["connection"] == "close"
        for target, kind, message in BODY_ROUTES:      # chunked alone: 411, as before
            for coding in ("chunked", "Chunked"):
                answer = raw(server, _head("POST", target, f"Transfer-Encoding: {coding}") + b"0\r\n\r\n")
                status, headers, body = split_response(answer)
                assert (status, _error(body, headers, kind, 411)) == (411, message), target


def test_uvicorn_judges_a_transfer_encoding_its_parser_lets_through_by_the_same_rule(asgi: Uvicorn) -> None:
    """What each parser refuses itself is the accepted limit (docs/serving.md); what reaches the app gets the
    answer serve gives, with ``Connection: close`` (which makes uvicorn close the connection)."""
    for target, kind, _ in BODY_ROUTES:
        both = _raw_uvicorn(asgi, _head("POST", target, "Transfer-Encoding: chunked", "Content-Length: 5")
                            + b"0\r\n\r\n")
        other = _raw_uvicorn(asgi, _head("POST", target, "Transfer-Encoding: gzip, chunked") + b"0\r\n\r\n")
        parser, app = (both, other) if asgi.http == "httptools" else (other, both)
        assert (parser[0], parser[2]) == (400, b"Invalid HTTP request received."), target
        status, headers, body = app
        expected = (400, TE_AND_CL) if app is both else (
            501, "Transfer-Encoding 'gzip, chunked' is not supported; send the body with its Content-Length")
        assert (status, _error(body, headers, kind, status)) == expected, target
        assert headers["connection"] == "close"
    status, headers, body = _raw_uvicorn(asgi, _head("GET", "/metrics", "Transfer-Encoding: chunked",
                                                     "Content-Length: 5") + b"0\r\n\r\n")
    expected_metrics = b"Invalid HTTP request received." if asgi.http == "httptools" else b'{"error": "%s"}' % (
        TE_AND_CL.encode())
    assert (status, body) == (400, expected_metrics)


# Heads serve refuses before h11 reads them, each with its status: what a head ended by bare LFs gets too.
BARE_LF = [
    (_head("POST", "/v1/responses", "Expect: 100-continue", "Content-Length: 99999999"), 413),
    (_head("POST", "/streams?tokens=3", "Content-Length: 99999999"), 413),
    (_head("POST", "/streams?tokens=3", "Content-Length: 5", "Content-Length: 6"), 400),
    (_head("GET", "/metrics", "Content-Length: 5", "Content-Length: 6"), 400),
    (_head("POST", "/chat", "Transfer-Encoding: gzip"), 501),
    (_head("POST", "/chat", "Transfer-Encoding: chunked", "Content-Length: 5"), 400),
    (_head("GET", "/v1/models", "Content-Length: " + "9" * 21), 413),
]


@pytest.mark.parametrize("ending", ["bare LF", "CRLF then bare LF"])
def test_serve_checks_a_head_whose_lines_end_with_a_bare_lf_as_one_whose_lines_end_with_crlf(loop_kind: str,
                                                                                             ending: str) -> None:
    """h11 reads a bare LF as a line's end (RFC 9112 §2.2), and the end of the head was found by CRLF CRLF alone:
    none of these was checked, so a 413's length got ``100 Continue``, one without its body no answer until the
    request timeout, two lengths h11's plain-text 400."""
    with serving() as server:
        for head, status in BARE_LF:
            crlf = split_response(raw(server, head))
            lf = head.replace(b"\r\n", b"\n") if ending == "bare LF" else head[:-2] + b"\n"
            assert crlf[0] == status, head
            assert split_response(raw(server, lf))[::2] == crlf[::2], lf
