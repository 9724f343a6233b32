"""The serverless report handler over a real loopback socket: every scenario and format, the Vercel path, the same
bytes twice, the refusals by status (400, 404, 405), HEAD.  (Its pure core and the Vercel wiring:
``unit/test_handler.py``.)"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest
from support.live import serving_report

from tokenwire.report.params import SCENARIOS
from tokenwire.report.render import render
from tokenwire.report.templating import csp

FORMATS = {"text": "text/plain; charset=utf-8", "json": "application/json; charset=utf-8",
           "html": "text/html; charset=utf-8"}


@pytest.fixture(scope="module")
def address() -> Iterator[tuple[str, int]]:
    with serving_report() as addr:
        yield addr


def fetch(address: tuple[str, int], target: str, method: str = "GET",
          body: bytes | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPConnection(*address, timeout=30)
    try:
        conn.request(method, target, body=body)
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def check_common_headers(headers: http.client.HTTPMessage, body: bytes) -> None:
    assert headers["Content-Length"] == str(len(body))
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Server"] == "tokenwire"                 # a name, no version banner
    assert headers.get_all("Content-Type") is not None and "charset=utf-8" in headers["Content-Type"]


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("scenario", [*SCENARIOS, "drop"])
def test_every_scenario_and_format_over_a_socket(address: tuple[str, int], scenario: str, fmt: str) -> None:
    status, headers, body = fetch(address, f"/?scenario={scenario}&format={fmt}")
    assert status == 200, body[:300]
    check_common_headers(headers, body)
    assert headers["Content-Type"] == FORMATS[fmt]
    assert headers["Cache-Control"] == "public, max-age=3600"
    canonical = "drop-newest" if scenario == "drop" else scenario
    if fmt == "json":
        assert json.loads(body)["scenario"] == canonical
    elif fmt == "html":
        assert headers["Content-Security-Policy"] == csp() and headers["Referrer-Policy"] == "no-referrer"
        assert body.startswith(b"<!doctype html>") and body.count(b"<svg") >= 6
    else:
        assert f"you chose          {canonical}\n".encode() in body
    assert body == render(f"scenario={scenario}&format={fmt}")[2]       # the socket adds nothing


def test_vercel_path_serves_the_same_report(address: tuple[str, int]) -> None:
    assert fetch(address, "/api/report?tokens=20")[2] == fetch(address, "/?tokens=20")[2]


def test_the_same_virtual_url_twice_gives_identical_bytes(address: tuple[str, int]) -> None:
    for target in ("/", "/?format=html&scenario=drop-oldest", "/?format=json&seed=5&tokens=100"):
        first, second = fetch(address, target), fetch(address, target)
        assert first[0] == second[0] == 200 and first[2] == second[2]


@pytest.mark.parametrize("query, names", [
    ("bogus=1", "bogus"), ("scenario=everything", "scenario"), ("format=pdf", "format"), ("clock=sundial", "clock"),
    ("tokens=many", "tokens"), ("tokens=0", "tokens"), ("tokens=1000", "tokens"), ("buffer=-1", "buffer"),
    ("buffer=100", "buffer"), ("reader_ms=NaN", "reader_ms"), ("reader_ms=Infinity", "reader_ms"),
    ("producer_ms=0", "producer_ms"), ("cut_after=70", "cut_after"), ("seed=1.5", "seed"),
    ("tokens=5&tokens=5", "tokens"), ("reader_ms", "reader_ms"), ("tokens=%FF", "tokens"),
])
def test_bad_parameters_are_400_plain_text_one_line(address: tuple[str, int], query: str, names: str) -> None:
    status, headers, body = fetch(address, f"/?{query}")
    assert status == 400
    check_common_headers(headers, body)
    assert headers["Content-Type"] == "text/plain; charset=utf-8" and headers["Cache-Control"] == "no-store"
    message = body.decode()
    assert message.endswith("\n") and message.count("\n") == 1 and names in message
    assert "got" in message or "given" in message or "has no value" in message


def test_real_clock_estimated_too_long_is_refused(address: tuple[str, int]) -> None:
    status, _, body = fetch(address, "/?clock=real&tokens=277&reader_ms=6")
    assert status == 400
    message = body.decode()
    assert message.startswith("clock=real would take about ") and "clock=virtual" in message
    assert message.count("\n") == 1


def test_real_clock_page_is_not_cached(address: tuple[str, int]) -> None:
    status, headers, body = fetch(address, "/?clock=real&tokens=8&buffer=2&reader_ms=1&cut_after=3")
    assert status == 200 and headers["Cache-Control"] == "no-store"
    assert b"The clock is real:" in body


@pytest.mark.parametrize("path", ["/x", "/api", "/api/report/", "/favicon.ico", "/static/live.js", "/index.html"])
def test_other_paths_are_404_plain_text(address: tuple[str, int], path: str) -> None:
    status, headers, body = fetch(address, path)
    assert status == 404
    check_common_headers(headers, body)
    assert body.decode().startswith(f"404 not found: {path!r}")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_are_405_with_allow(address: tuple[str, int], method: str) -> None:
    status, headers, body = fetch(address, "/?scenario=block", method, body=b"x=1")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    check_common_headers(headers, body)
    assert body.decode() == f"405 method not allowed: {method}; this page answers GET and HEAD\n"


def test_unknown_method_is_plain_text_too(address: tuple[str, int]) -> None:
    status, headers, body = fetch(address, "/", "BREW")
    assert status == 501 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert b"<" not in body


@pytest.mark.parametrize("target", ["/", "/?format=html", "/?tokens=0", "/nowhere"])
def test_head_sends_the_get_headers_without_a_body(address: tuple[str, int], target: str) -> None:
    got = fetch(address, target)
    head = fetch(address, target, "HEAD")
    assert head[0] == got[0] and head[2] == b""
    assert head[1]["Content-Length"] == str(len(got[2]))
    assert head[1]["Content-Type"] == got[1]["Content-Type"]
