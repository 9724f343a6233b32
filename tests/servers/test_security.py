"""Security basics for a page people will host: unguessable ids that never leak, strict pages,
no version banners, and no way to make the report sleep for long."""

from __future__ import annotations

import http.client
import json
import re
import sys
import time
from collections.abc import Iterator

import pytest
from support.live import (
    SERVER_NAME,
    TIMEOUT_S,
    create,
    events,
    open_events,
    raw,
    read_head,
    read_to_end,
    request,
    serving,
    serving_report,
    split_response,
)

from tokenwire.endpoints.registry import Registry
from tokenwire.live.server import LiveServer
from tokenwire.report.render import REAL_BUDGET_MS


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with serving() as live:
        yield live


def test_a_stream_shows_only_its_own_id_and_near_misses_are_404(server: LiveServer) -> None:
    a = open_events(server, "/stream?tokens=40&producer_ms=1")
    b = open_events(server, "/stream?tokens=40&producer_ms=1")
    try:
        assert read_head(a)[0] == 200 and read_head(b)[0] == 200
        body_a, body_b = read_to_end(a), read_to_end(b)
    finally:
        a.close()
        b.close()
    id_a = json.loads(events(body_a)[0].data)["stream_id"]
    id_b = json.loads(events(body_b)[0].data)["stream_id"]
    assert id_a != id_b
    assert id_b.encode() not in body_a and id_a.encode() not in body_b
    flipped = id_a[:-1] + ("A" if id_a[-1] != "A" else "B")
    near = [flipped, id_a.upper() if id_a.upper() != id_a else id_a.lower(), id_a[:-1], id_a + "x", id_a[:8]]
    for guess in near:
        status, headers, body = request(server, "GET", f"/streams/{guess}/events")
        rest = body.replace(guess.encode(), b"")          # the guess is quoted back, nothing else is
        assert status == 404 and id_a.encode() not in rest and id_b.encode() not in rest, guess
        assert headers["cache-control"] == "no-store"
    listing = request(server, "GET", "/streams")
    assert listing[0] == 405 and id_a.encode() not in listing[2]
    for path in ("/live", "/", "/?format=html", "/?format=json", "/static/live.js"):
        body = request(server, "GET", path)[2]
        assert id_a.encode() not in body and id_b.encode() not in body, path


def test_what_carries_an_id_is_not_cached_and_sends_no_referrer(server: LiveServer) -> None:
    status, headers, body = request(server, "POST", "/streams?tokens=5")
    sid = json.loads(body)["stream_id"]
    assert status == 201 and headers["cache-control"] == "no-store" and headers["location"].count(sid) == 1
    events_headers = request(server, "GET", f"/streams/{sid}/events")[1]
    assert events_headers["cache-control"] == "no-store"
    assert request(server, "GET", "/live")[1]["referrer-policy"] == "no-referrer"   # the events URL stays here


# -- strict pages -------------------------------------------------------------------------------------------
def _csp(value: str) -> dict[str, list[str]]:
    directives = {}
    for part in value.split(";"):
        words = part.split()
        if words:
            directives[words[0]] = words[1:]
    return directives


def _check_strict_html(headers: dict[str, str], body: bytes, where: str) -> dict[str, list[str]]:
    assert headers["content-type"] == "text/html; charset=utf-8", where
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer", where
    csp = _csp(headers["content-security-policy"])
    assert csp["default-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"], where
    assert csp["base-uri"] == ["'none'"], where
    scripts = csp.get("script-src", csp["default-src"])
    assert not {"'unsafe-inline'", "'unsafe-eval'", "*", "data:", "http:", "https:"} & set(scripts), where
    assert not any(s.startswith(("'sha", "'nonce")) for s in scripts), where          # no inline script at all
    page = body.decode()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page), where                 # every script is a file
    assert not re.search(r"\son[a-z]+\s*=", page), where                                # no inline handlers
    assert "javascript:" not in page, where
    return csp


def test_the_live_page_runs_only_its_own_script_file(server: LiveServer) -> None:
    status, headers, body = request(server, "GET", "/live?tokens=20")
    csp = _check_strict_html(headers, body, "/live")
    assert status == 200 and csp["script-src"] == ["'self'"] and csp["connect-src"] == ["'self'"]
    assert " style=" not in body.decode() and "<style" not in body.decode()
    for name in ("live.js", "live.css"):
        static = request(server, "GET", f"/static/{name}")
        assert static[0] == 200 and static[1]["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("scenario", ["disconnect", "drop-oldest"])
def test_the_report_page_runs_no_script_at_all(server: LiveServer, scenario: str) -> None:
    status, headers, body = request(server, "GET", f"/?format=html&scenario={scenario}")
    csp = _check_strict_html(headers, body, scenario)
    assert status == 200 and "script-src" not in csp and b"<script" not in body
    assert all(s.startswith("'sha256-") for s in csp["style-src"])


# -- no version banners -----------------------------------------------------------------------------------
BANNERS = re.compile(rb"Python/|BaseHTTP|SimpleHTTP|Werkzeug|\d+\.\d+\.\d+")


def _every_kind_of_answer(server: LiveServer) -> dict[str, tuple[int, dict[str, str], bytes]]:
    sid = create(server, "tokens=5")
    answers = {
        "200 text": request(server, "GET", "/?tokens=5"),
        "200 html": request(server, "GET", "/?format=html&tokens=5"),
        "200 live page": request(server, "GET", "/live"),
        "200 static": request(server, "GET", "/static/live.css"),
        "200 event stream": request(server, "GET", f"/streams/{sid}/events"),
        "201": request(server, "POST", "/streams?tokens=5"),
        "204": request(server, "GET", f"/streams/{sid}/events", headers={"Last-Event-ID": "4"}),
        "400 report": request(server, "GET", "/?tokens=x"),
        "400 live": request(server, "POST", "/streams?tokens=x"),
        "404 report": request(server, "GET", "/nope"),
        "404 stream": request(server, "GET", "/streams/nope/events"),
        "405": request(server, "DELETE", "/live"),
        "413": request(server, "POST", "/streams", body=b"x" * 4096),
        "400 stdlib": split_response(raw(server, b"GET / HTTP/1.x\r\n\r\n")),
        "414": split_response(raw(server, b"GET /?" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")),
        "431": split_response(raw(server, b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n")),
        "501": split_response(raw(server, b"BREW / HTTP/1.1\r\n\r\n")),
    }
    return answers


def test_no_answer_carries_a_version_banner(server: LiveServer) -> None:
    for kind, (status, headers, body) in _every_kind_of_answer(server).items():
        assert str(status) == kind.split()[0], (kind, status)
        assert headers["server"] == SERVER_NAME, (kind, headers)
        assert "x-powered-by" not in headers, kind
        assert not BANNERS.search(body[:4096] if not kind.startswith("200") else b""), (kind, body[:200])
        assert sys.version.split()[0].encode() not in body, kind


def test_past_max_live_the_503_carries_no_banner_either() -> None:
    with serving(Registry(max_live=1)) as server:
        held = open_events(server, "/stream?tokens=30&producer_ms=100")
        try:
            assert read_head(held)[0] == 200
            status, headers, body = request(server, "GET", "/stream?tokens=3")
        finally:
            held.close()
    assert status == 503 and headers["server"] == SERVER_NAME and not BANNERS.search(body)


def test_the_serverless_handler_names_itself_without_a_version() -> None:
    answers = []
    with serving_report() as address:
        for method, target in (("GET", "/?tokens=5"), ("GET", "/nope"), ("DELETE", "/"), ("BREW", "/")):
            conn = http.client.HTTPConnection(*address, timeout=TIMEOUT_S)
            conn.request(method, target)
            response = conn.getresponse()
            answers.append((response.status, response.getheader("Server"), response.read()))
            conn.close()
    assert [a[0] for a in answers] == [200, 404, 405, 501]
    assert all(a[1] == SERVER_NAME for a in answers)


# -- the real-clock cap -------------------------------------------------------------------------------------
SLOWEST = "clock=real&tokens=277&reader_ms=100&producer_ms=100&buffer=1"


def test_the_report_refuses_a_real_clock_run_past_its_budget_at_once(server: LiveServer) -> None:
    started = time.monotonic()
    status, headers, body = request(server, "GET", f"/?{SLOWEST}")
    elapsed = time.monotonic() - started
    message = body.decode()
    estimate_s = float(re.search(r"about ([0-9.]+) s", message).group(1))  # type: ignore[union-attr]
    assert status == 400 and headers["cache-control"] == "no-store"
    assert f"over the {REAL_BUDGET_MS / 1000:g} s a page may take" in message
    assert estimate_s > REAL_BUDGET_MS / 1000
    assert elapsed < estimate_s / 10            # refused from the estimate, not after running
    for fmt in ("html", "json"):
        assert request(server, "GET", f"/?{SLOWEST}&format={fmt}")[0] == 400
