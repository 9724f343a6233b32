"""Bad input everywhere it enters a server in this process: query parameters (page, live endpoints),
``Last-Event-ID``, paths and methods, and what is reflected into HTML (oversized and malformed
requests and unknown methods, refused by the HTTP layer, are ``test_http``'s; the command line's,
``unit/test_cli_usage.py``'s).

Each bad input gets one answer: a 4xx (or exit status 2) whose message
names the parameter, quotes the value (shortened when long) and says what
is allowed; never a 500, a traceback, or a dropped connection.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from unittest.mock import ANY
from urllib.parse import quote, unquote

import pytest
from support.live import (
    SERVER_NAME,
    create,
    error_of,
    events,
    raw,
    request,
    serving,
    split_response,
    token_ids,
    token_text,
)

from tokenwire.core.model import ANSWER
from tokenwire.endpoints.config import MAX_REQUEST_LINE
from tokenwire.endpoints.params import MAX_ECHO_CHARS, MAX_ID_DIGITS, REPORT_ONLY_PARAMS
from tokenwire.live.server import LiveServer

# -- query parameters ------------------------------------------------------------------------------------
# Values no parameter accepts, whatever its range.
BAD = {
    "empty": "",
    "non-numeric": "abc",
    "negative": "-1",
    "huge": "9" * 30,
    "nan": "NaN",
    "inf": "inf",
    "exponent": "1e3",
    "hex": "0x10",
    "non-ascii digit": "\u0663",          # ARABIC-INDIC DIGIT THREE: int() would take it
    "non-ascii": "\u00e9\u6f22",
    "null": "\x00",
    "space": " 5",
    "very long": "7" * 1500,             # a whole query past 2048 characters is refused as such (below)
}
REPORT_NUMBERS = ("tokens", "buffer", "reader_ms", "producer_ms", "cut_after", "seed")
REPORT_CHOICES = ("scenario", "format", "clock")
ZERO_IS_BAD = ("tokens", "buffer", "producer_ms")     # a zero-token answer, zero slots, a free model step
ALLOWED_WORDS = re.compile(r"must be|one of|allowed|at most|give it once|has no value|write it as")


def _bad_cases(name: str) -> dict[str, str]:
    cases = {f"{name}={kind}": f"{name}={quote(value, safe='')}" for kind, value in BAD.items()
             if not (name == "cut_after" and kind == "empty")}     # a blank cut is the default for the tokens
    if name in ZERO_IS_BAD:
        cases[f"{name}=zero"] = f"{name}=0"
    cases[f"{name} missing its value"] = name
    cases[f"{name} repeated"] = f"{name}=1&{name}=2"
    return cases


def _value_of(query: str) -> str | None:
    """The raw value a case sends (None when the parameter has no '=')."""
    _, eq, value = query.partition("&")[0].partition("=")
    return unquote(value) if eq else None


def _check_message(case: str, name: str, value: str | None, message: str) -> None:
    assert name in message, (case, message)
    if value is not None:
        shown = value if len(value) <= MAX_ECHO_CHARS else value[:MAX_ECHO_CHARS]
        assert repr(shown)[:-1] in message, (case, message)       # quoted (a long one cut short)
    assert ALLOWED_WORDS.search(message), (case, message)
    assert len(message) < 600, (case, len(message))
    assert "Traceback" not in message


ENTRY_POINTS = ("page", "POST /streams", "GET /stream")


def _ask(server: LiveServer, entry: str, query: str) -> tuple[int, dict[str, str], str]:
    if entry == "page":
        status, headers, body = request(server, "GET", f"/?{query}")
        assert headers["content-type"] == "text/plain; charset=utf-8", body
        return status, headers, body.decode()
    method, path = entry.split()
    status, headers, body = request(server, method, f"{path}?{query}")
    assert headers["content-type"] == "application/json", body
    return status, headers, error_of(body)


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with serving() as live:
        yield live


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("name", REPORT_NUMBERS + REPORT_CHOICES)
def test_every_bad_report_parameter_is_a_400_naming_it_its_value_and_what_is_allowed(
        server: LiveServer, entry: str, name: str) -> None:
    if entry != "page" and name == "cut_after":
        name = "seed"        # the live endpoints read cut_after as their own (next test)
    for case, query in _bad_cases(name).items():
        status, headers, message = _ask(server, entry, query)
        assert status == 400, (case, status, message)
        assert headers["x-content-type-options"] == "nosniff" and headers["server"] == SERVER_NAME
        value = _value_of(query)
        if case.endswith("repeated"):                           # refused naming both values, on every entry
            assert "'1'" in message and "'2'" in message, (case, message)
            value = None
        elif entry != "page" and name in REPORT_ONLY_PARAMS:    # refused whatever its value (below)
            assert "is the report's, not a live stream's" in message, (case, message)
        _check_message(case, name, value, message)


CREATE_ALLOWED = "allowed: scenario, tokens, buffer, producer_ms, cut_after, seed"


@pytest.mark.parametrize("entry", ["POST /streams", "GET /stream"])
def test_a_live_stream_refuses_the_reports_own_parameters(server: LiveServer, entry: str) -> None:
    """``format``, ``clock`` and ``reader_ms`` are the report's: a create was quietly ignoring them."""
    for query, name, value in [("format=html&clock=virtual", "format", "html"), ("clock=real", "clock", "real"),
                               ("tokens=5&reader_ms=3", "reader_ms", "3")]:
        assert _ask(server, entry, query) == (400, ANY, (
            f"parameter {name!r} (given {value!r}) is the report's, not a live stream's: its reader is the client, "
            f"on the real clock; {CREATE_ALLOWED}"))
    assert _ask(server, entry, "tokens=5&bogus=1")[2] == f"unknown parameter 'bogus' (given '1'); {CREATE_ALLOWED}"
    every = "scenario=drop&tokens=3&buffer=2&producer_ms=0.5&seed=4&cut_after=1"
    assert request(server, "POST", f"/streams?{every}")[0] == 201


def test_the_report_still_takes_its_own_parameters(server: LiveServer) -> None:
    assert _ask(server, "page", "format=text&clock=virtual&reader_ms=1&tokens=5")[0] == 200


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_unknown_parameters_and_a_query_past_its_bounds_are_400(server: LiveServer, entry: str) -> None:
    unknown = {"bogus=1": "bogus", "t%C3%B6kens=5": "t\u00f6kens", "=5": "''", "%00=1": "\\x00"}
    for query, shown in unknown.items():
        status, _, message = _ask(server, entry, query)
        assert status == 400 and "unknown parameter" in message and shown in message, (query, message)
        assert "allowed:" in message
    status, _, message = _ask(server, entry, "&".join(f"seed={i}" for i in range(100)))
    assert status == 400 and ("more than once" in message or "more than 64" in message), message
    status, _, message = _ask(server, entry, "seed=" + "7" * 3000)
    assert status == 400 and ("at most 2048" in message or "got '7777" in message), message
    assert len(message) < 600


# 0 is a cut before the first token (one range everywhere: 0 to tokens-1); empty
# is the report's default cut, but the live endpoints cut only when asked.
LIVE_COUNTS = {**{kind: value for kind, value in BAD.items()}, "leading zero": "07",
               "past the answer": "30", "plus": "+3"}


@pytest.mark.parametrize("entry", ["POST /streams", "GET /stream"])
def test_every_bad_cut_after_on_the_live_endpoints_is_a_400(server: LiveServer, entry: str) -> None:
    for kind, value in LIVE_COUNTS.items():
        status, headers, message = _ask(server, entry, f"tokens=30&cut_after={quote(value, safe='')}")
        assert status == 400, (kind, message)
        _check_message(kind, "cut_after", value, message)
    status, _, message = _ask(server, entry, "cut_after=3&cut_after=4")
    assert status == 400 and message == "parameter 'cut_after' given more than once ('3' and '4'); give it once"
    status, _, message = _ask(server, entry, "tokens=1&cut_after=1")
    assert status == 400 and message == "cut_after must be a whole number from 0 to tokens-1 (0); got '1'"
    status, _, message = _ask(server, entry, "last_event_id=3")
    assert status == 400 and message == "last_event_id applies to /streams/<id>/events, not to a new stream"


def test_an_events_url_takes_only_its_own_two_parameters(server: LiveServer) -> None:
    sid = create(server)
    for query, word in {"tokens=5": "tokens", "bogus=%3Cx%3E": "bogus", "cut_after=abc": "cut_after",
                        "cut_after=-1": "cut_after", "cut_after=30": "cut_after"}.items():
        status, _, body = request(server, "GET", f"/streams/{sid}/events?{query}")
        assert status == 400 and word in error_of(body), (query, body)


# -- Last-Event-ID -----------------------------------------------------------------------------------------
TOKENS = 30
MALFORMED = {
    "non-numeric": b"abc",
    "negative": b"-1",
    "plus": b"+1",
    "leading zeros": b"007",
    "decimal": b"1.0",
    "exponent": b"1e1",
    "inner space": b"1 2",
    "10,000 digits": b"9" * 10_000,
    "non-ascii digit": "\u0663".encode(),
    "non-ascii": "\u00e9".encode(),
    "not utf-8": b"\xff\xfe",
}


def _events_with_header(server: LiveServer, sid: str, value: bytes, target: str | None = None) -> bytes:
    path = target or f"/streams/{sid}/events"
    return raw(server, b"GET %s HTTP/1.1\r\nHost: x\r\nLast-Event-ID: %s\r\n\r\n" % (path.encode(), value))


@pytest.fixture(scope="module")
def finished(server: LiveServer) -> str:
    """A stream of TOKENS tokens, read once to its end."""
    sid = create(server, f"tokens={TOKENS}")
    assert token_ids(request(server, "GET", f"/streams/{sid}/events")[2]) == list(range(TOKENS))
    return sid


@pytest.mark.parametrize("kind", MALFORMED)
def test_a_malformed_last_event_id_is_a_400_that_quotes_it_as_utf8(server: LiveServer, finished: str,
                                                                   kind: str) -> None:
    value = MALFORMED[kind]
    status, headers, body = split_response(_events_with_header(server, finished, value))
    text = value.decode("utf-8", "replace")
    shown = text if len(text) <= MAX_ECHO_CHARS else text[:MAX_ECHO_CHARS]
    message = error_of(body)
    assert status == 400 and headers["content-type"] == "application/json"
    assert message.startswith(f"Last-Event-ID must be a decimal integer without sign or leading zeros "
                              f"(at most {MAX_ID_DIGITS} digits), got {repr(shown)[:-1]}")
    if len(text) > MAX_ECHO_CHARS:
        assert message.endswith(f"... ({len(text)} characters)") and len(body) < 400
    # The query parameter says the same about the same value (a URL past the request-line bound is a 414).
    target = f"/streams/{finished}/events?last_event_id={quote(value)}"
    status_q, _, body_q = request(server, "GET", target)
    if len(target) > MAX_REQUEST_LINE:
        assert status_q == 414
    else:
        assert status_q == 400 and error_of(body_q).startswith("last_event_id must be a decimal integer")


def test_a_nul_in_a_header_is_refused_by_the_http_parser_and_in_the_query_by_the_route(
        server: LiveServer, finished: str) -> None:
    status, headers, body = split_response(_events_with_header(server, finished, b"1\x00"))
    assert status == 400 and headers["content-type"] == "application/json"       # the route's own format
    assert error_of(body).startswith("bad request: ")
    status_q, _, body_q = request(server, "GET", f"/streams/{finished}/events?last_event_id=1%00")
    assert status_q == 400 and error_of(body_q).startswith("last_event_id must be a decimal integer")


def test_each_well_formed_last_event_id_has_one_defined_answer(server: LiveServer, finished: str) -> None:
    def ask(value: bytes) -> tuple[int, bytes]:
        status, _, body = split_response(_events_with_header(server, finished, value))
        return status, body

    empty, spaces, padded = ask(b""), ask(b"   "), ask(b" 12\t")
    assert empty[0] == 200 and token_ids(empty[1]) == list(range(TOKENS))        # empty: from the start
    assert spaces[0] == 200 and token_ids(spaces[1]) == list(range(TOKENS))      # HTTP whitespace is not the value
    assert padded[0] == 200 and token_ids(padded[1]) == list(range(13, TOKENS))
    zero = ask(b"0")
    assert zero[0] == 200 and token_ids(zero[1]) == list(range(1, TOKENS))
    last = ask(str(TOKENS - 1).encode())
    assert last == (204, b"")                                                  # it has everything: stop
    for past in (str(TOKENS).encode(), b"999999999"):
        status, body = ask(past)
        assert status == 400 and error_of(body) == (f"Last-Event-ID {past.decode()!r} is past the end: "
                                                    f"this stream has ids 0..{TOKENS - 1}")


def test_an_id_never_sent_a_repeated_header_and_a_header_on_a_new_stream_are_400(server: LiveServer) -> None:
    fresh = create(server, "tokens=10&producer_ms=50")
    status, _, body = split_response(_events_with_header(server, fresh, b"3"))
    assert status == 400 and error_of(body) == "Last-Event-ID '3' was never sent: this stream has generated no ids yet"
    twice = raw(server, b"GET /streams/%s/events HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 1\r\nLast-Event-ID: 2\r\n\r\n"
                % fresh.encode())
    status, _, body = split_response(twice)
    assert status == 400 and error_of(body) == "Last-Event-ID given 2 times; send it once"
    before = len(server.registry)
    status, _, body = split_response(_events_with_header(server, "", b"3", "/stream?tokens=5"))
    assert status == 400 and error_of(body).startswith("Last-Event-ID resumes a stream at /streams/<id>/events")
    assert len(server.registry) == before                                     # no stream made for nothing


def test_an_id_from_another_stream_is_read_as_an_index_of_this_one(server: LiveServer, finished: str) -> None:
    short = create(server, "tokens=10&seed=7")
    assert token_ids(request(server, "GET", f"/streams/{short}/events")[2]) == list(range(10))
    status, _, body = split_response(_events_with_header(server, short, b"20"))     # valid on the long one
    assert status == 400 and error_of(body) == "Last-Event-ID '20' is past the end: this stream has ids 0..9"
    status, _, body = split_response(_events_with_header(server, short, b"5"))
    opened = json.loads(events(body)[0].data)
    assert status == 200 and opened["stream_id"] == short and token_ids(body) == [6, 7, 8, 9]
    assert token_text(body) == "".join(ANSWER[6:10])
    assert finished.encode() not in body


# -- paths and methods ---------------------------------------------------------------------------------------
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")
SERVED = {"/streams": "POST", "/stream?tokens=3": "GET", "/live": "GET, HEAD", "/static/live.js": "GET, HEAD",
          "/static/live.css": "GET, HEAD", "/": "GET, HEAD", "/api/report": "GET, HEAD"}
NOT_SERVED = ["/nope", "/streams/", "/streams/x", "/streams/abc/events/x", "/live/", "/STREAMS", "/static/",
              "/static/nope.js", "/api", "/index.html", "/stream/"]


def test_every_method_on_every_path_has_one_answer(server: LiveServer) -> None:
    sid = create(server, "tokens=3")
    served = {**SERVED, f"/streams/{sid}/events": "GET"}
    for path, allow in served.items():
        for method in METHODS:
            status, headers, body = request(server, method, path)
            if method in allow.split(", "):
                assert status in (200, 201), (method, path, status, body)
            else:
                assert status == 405 and headers["allow"] == allow, (method, path, status, headers)
                assert method == "HEAD" or method in body.decode(), (method, path, body)
            assert headers["x-content-type-options"] == "nosniff", (method, path)
    for path in NOT_SERVED:
        for method in METHODS:
            status, headers, _ = request(server, method, path)
            assert status == 404, (method, path, status)
            assert headers["x-content-type-options"] == "nosniff", (method, path)


TRAVERSALS = [
    "/static/../server.py", "/static/..%2fserver.py", "/static/%2e%2e/server.py", "/static/%2e%2e%2fserver.py",
    "/static/../../pyproject.toml", "/static//etc/passwd", "/static/live.js/../../server.py",
    "/static/./live.js", "/static/live.js%00.py", "/static/..\\server.py", "/static/LIVE.JS", "/static/live.js.",
    "/static/%6c%69%76%65.js", "/../../etc/passwd", "//etc/passwd", "/templates/report.html",
    "/tokenwire/server.py", "/static/../templates/live.html", "/static/../__init__.py",
]


def test_no_path_reaches_a_file_outside_the_two_static_files(server: LiveServer) -> None:
    secrets = [b"import ", b"root:", b"[project]", b"{%"]
    for path in TRAVERSALS:
        # An escape of '/' or an unreserved character ('.', a letter) is a second spelling: 400.
        expected = 400 if re.search(r"%(2[eEfF]|[67][0-9a-fA-F])", path) else 404
        for method in ("GET", "HEAD"):
            status, _, body = request(server, method, path)
            assert status == expected, (method, path, status)
            assert not any(s in body for s in secrets), (path, body[:200])
    # A query is not part of the path: the file named by the path is what comes back.
    status, _, body = request(server, "GET", "/static/live.js?x=../server.py")
    assert status == 200 and body.startswith(b"// The live page")


# -- what is reflected into HTML --------------------------------------------------------------------------------
PAYLOAD = "<script>alert(1)</script>\"'</x><img src=x onerror=alert(2)>"


def _safe(response: tuple[int, dict[str, str], bytes], where: str) -> None:
    status, headers, body = response
    assert status < 500, where
    assert headers.get("x-content-type-options") == "nosniff", where
    if headers.get("content-type", "").startswith("text/html"):
        for needle in (b"<script>alert", b"<img src=x", b"</x>", b"onerror=alert"):
            assert needle not in body, (where, needle)
    else:
        assert "html" not in headers.get("content-type", ""), where


def test_a_script_payload_in_every_parameter_and_path_is_never_live_html(server: LiveServer) -> None:
    value = quote(PAYLOAD, safe="")
    names = [*REPORT_NUMBERS, *REPORT_CHOICES, "cut_after", "last_event_id", value]
    sid = create(server, "tokens=3")
    for name in names:
        for target in (f"/?format=html&{name}={value}", f"/?{name}={value}&format=html", f"/?{name}={value}",
                       f"/live?{name}={value}", f"/streams?{name}={value}", f"/stream?{name}={value}",
                       f"/streams/{sid}/events?{name}={value}", f"/api/report?format=html&{name}={value}"):
            method = "POST" if target.startswith("/streams?") else "GET"
            _safe(request(server, method, target), target)
    for target in (f"/{value}", f"/static/{value}", f"/streams/{value}/events", f"/{PAYLOAD}"):
        _safe(split_response(raw(server, f"GET {target} HTTP/1.1\r\n\r\n".encode())), target)
    _safe(split_response(raw(server, f"GET / HTTP/1.1{PAYLOAD}\r\n\r\n".encode())), "version")
    _safe(split_response(_events_with_header(server, sid, PAYLOAD.encode())), "Last-Event-ID")


@pytest.mark.parametrize(("line", "name"), [(b"Authorization : Bearer sekrit-token-1", "Authorization"),
                                            (b"Cookie session=sekrit-cookie-2", "Cookie")])
def test_a_malformed_header_line_is_a_400_naming_its_header_not_its_value(server: LiveServer, line: bytes,
                                                                           name: str) -> None:
    status, _, body = split_response(raw(server, b"GET /streams HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n" % line))
    assert (status, error_of(body)) == (400, f"bad request: illegal header line {name!r}: a header is its name, "
                                             f"':' right after it, then its value (not shown here)")
