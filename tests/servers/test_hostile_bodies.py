"""The probe's hostile requests on the three servers: ``tokenwire serve``, ``uvicorn tokenwire.asgi:app`` and
``tokenwire proxy`` (in front of the stand-in upstream), each a real process.

Deep JSON (5,000 and 100,000 levels), lone surrogates in ``tokens``, ``seed`` and ``cut_after``, a 1 MB
``model``, the proxy's ``messages`` and ``input`` items that are not messages, a query string where a route takes
none and a parameter given twice: each is a 400 in the route's own format naming what is wrong, and no server
prints a traceback or answers 500.  Before, the deep bodies and the surrogates were 500s (a traceback a request
under uvicorn and on the proxy), the proxy's ``[1]`` too, and the queries were taken and ignored.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from support.asgi import ROOT, uvicorn
from support.processes import stop

START_TIMEOUT_S = 20.0
SERVING = re.compile(r"serving on http://127\.0\.0\.1:(\d+)/")
CHAT_ROUTES = ("/chat", "/v1/chat/completions", "/v1/responses")
BASE: dict[str, dict[str, Any]] = {"/chat": {"messages": []},
                                   "/v1/chat/completions": {"model": "n=2", "messages": [{"role": "user",
                                                                                          "content": "hi"}]},
                                   "/v1/responses": {"model": "n=2", "input": "hi"}}


class Server:
    """A server process: its base URL and what it said on stderr."""

    def __init__(self, name: str, url: str, said: Callable[[], str]) -> None:
        self.name, self.url, self.said = name, url, said


def _tokenwire(argv: list[str]) -> Iterator[Server]:
    errors = tempfile.TemporaryFile()
    env = {k: v for k, v in os.environ.items() if k not in ("TOKENWIRE_LOG_URL", "TOKENWIRE_TEST_LOG")}
    proc = subprocess.Popen([sys.executable, "-m", "tokenwire", *argv, "--port", "0"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=errors)
    box: list[bytes] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(START_TIMEOUT_S)
    found = SERVING.search(box[0].decode()) if box else None
    if found is None:
        proc.kill()
        raise RuntimeError(f"tokenwire {argv[0]} did not start: {box!r}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # type: ignore[union-attr]

    def said() -> str:
        errors.seek(0)
        return errors.read().decode(errors="replace")
    try:
        yield Server(argv[0], f"http://127.0.0.1:{found.group(1)}", said)
    finally:
        stop(proc, 15, START_TIMEOUT_S)
        errors.close()


@pytest.fixture(scope="module", params=["serve", "uvicorn", "proxy"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "serve":
        yield from _tokenwire(["serve"])
    elif request.param == "uvicorn":
        with uvicorn("tokenwire.asgi:app") as app:
            yield Server("uvicorn", app.url, app.stderr)
    else:
        with uvicorn("support.apps.upstream_standin:app") as upstream:
            yield from _tokenwire(["proxy", "--upstream", upstream.url + "/v1"])


def post(server: Server, route: str, body: bytes) -> httpx.Response:
    return httpx.post(server.url + route, content=body, headers={"content-type": "application/json"}, timeout=30)


def error_of(route: str, response: httpx.Response) -> str:
    """The message of a 400 in ``route``'s own format."""
    assert response.status_code == 400, response.text
    body = response.json()
    if route == "/chat":
        assert set(body) == {"error"} and isinstance(body["error"], str)
        return str(body["error"])
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["code"] is None
    return str(body["error"]["message"])


def what(route: str) -> str:
    return "a chat body" if route == "/chat" else "the body"


def with_field(route: str, raw: bytes) -> bytes:
    return json.dumps(BASE[route]).encode()[:-1] + b", " + raw + b"}"


def no_traceback(server: Server) -> None:
    said = server.said()
    assert "Traceback" not in said and '" 500 ' not in said, said[-2000:]


@pytest.mark.parametrize("route", CHAT_ROUTES)
@pytest.mark.parametrize("levels", [5_000, 100_000])
def test_deep_json_is_a_400_naming_the_depth(server: Server, route: str, levels: int) -> None:
    deep = b"[" * levels + b"]" * levels
    for body in (deep, with_field(route, b'"x": ' + deep)):
        assert error_of(route, post(server, route, body)) == f"{what(route)} is JSON nested deeper than 64 levels"
    no_traceback(server)


@pytest.mark.parametrize("route", CHAT_ROUTES)
@pytest.mark.parametrize("name", ["tokens", "seed", "cut_after"])
def test_a_lone_surrogate_is_a_400_naming_its_field(server: Server, route: str, name: str) -> None:
    for raw in (b'"\\ud800"', b'"\xed\xa0\x80"'):
        message = error_of(route, post(server, route, with_field(route, f'"{name}": '.encode() + raw)))
        assert message == (f"{what(route)}'s field {name!r} holds a value with a lone surrogate (U+D800), which is "
                           f"no text: send Unicode text, as UTF-8")
    no_traceback(server)


@pytest.mark.parametrize("route", CHAT_ROUTES)
def test_a_body_in_utf_16_or_with_numbers_json_has_not_is_a_400_saying_which(server: Server, route: str) -> None:
    """UTF-16 hid a lone surrogate and the nesting from the checks (a 200 that echoed "\ud800"); NaN reached the
    upstream's encoder (a message naming no field); 4,001 digits met Python's own conversion limit."""
    utf16 = json.dumps({**BASE[route], "model": "m\ud800", "x": [[[[0]]]]}).encode("utf-16")
    assert error_of(route, post(server, route, utf16)) == \
        f"{what(route)} must be JSON in UTF-8, got what reads as UTF-16"
    for raw, said in ((b'"temperature": NaN', "it holds NaN, which is no JSON number (JSON has no NaN or Infinity)"),
                      (b'"temperature": -Infinity', "it holds -Infinity, which is no JSON number (JSON has no NaN or "
                                                    "Infinity)"),
                      (b'"temperature": 1e999', "it holds the number '1e999', past a double's range"),
                      (b'"tokens": ' + b"9" * 4001, "it holds an integer of 4001 digits, longer than the 100 any "
                                                    "field takes")):
        assert error_of(route, post(server, route, with_field(route, raw))) == f"{what(route)} must be JSON: {said}"
    no_traceback(server)


def test_several_choices_are_refused_by_name(server: Server) -> None:
    """The canned answer took any ``n`` (5, "s", {}) and answered one choice; the proxy refused it already."""
    why = ("the proxy relays one answer per stream (several choices are neither spliced nor kept apart)"
           if server.name == "proxy" else "the canned answer is one answer, one choice")
    for n in (2, "s", {}):
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": n}).encode()
        assert error_of("/v1/chat/completions", post(server, "/v1/chat/completions", body)) == \
            f"n must be 1: {why}, got {json.dumps(n)!r}"


@pytest.mark.parametrize("route", CHAT_ROUTES[1:])
def test_a_huge_model_is_a_400_naming_the_limit(server: Server, route: str) -> None:
    body = json.dumps({**BASE[route], "model": "m" * 1_000_000}).encode()
    assert error_of(route, post(server, route, body)) == ("the body's 'model' is 1000000 characters; at most 256 "
                                                          "are taken")
    no_traceback(server)


@pytest.mark.parametrize(("route", "field", "items", "message"), [
    ("/v1/chat/completions", "messages", [1], "messages[0] must be a message, an object with a \"role\", got '1'"),
    ("/v1/chat/completions", "messages", [None],
     "messages[0] must be a message, an object with a \"role\", got 'null'"),
    ("/v1/chat/completions", "messages", ["ab"],
     "messages[0] must be a message, an object with a \"role\", got '\"ab\"'"),
    ("/v1/responses", "input", [{"role": "user", "content": "hi"}, 1],
     "input[1] must be a message, an object with a \"role\", got '1'"),
])
def test_the_proxy_refuses_an_item_that_is_no_message_naming_its_index(
        server: Server, route: str, field: str, items: list[Any], message: str) -> None:
    response = post(server, route, json.dumps({**BASE[route], field: items}).encode())
    if server.name == "proxy":
        assert error_of(route, response) == message
    else:
        assert response.status_code == 200          # the canned answer reads no messages
    no_traceback(server)


def test_a_route_that_takes_no_query_string_refuses_one_and_no_parameter_comes_twice(server: Server) -> None:
    made = post(server, "/v1/responses", json.dumps({**BASE["/v1/responses"], "background": True}).encode())
    response_id = made.json()["id"]
    refused = {
        "POST /v1/chat/completions": post(server, "/v1/chat/completions?x=1",
                                          json.dumps(BASE["/v1/chat/completions"]).encode()),
        "POST /v1/responses": post(server, "/v1/responses?x=1", json.dumps(BASE["/v1/responses"]).encode()),
        "GET /v1/models": httpx.get(server.url + "/v1/models?x=1"),
        "POST /v1/responses/<id>/cancel": httpx.post(f"{server.url}/v1/responses/{response_id}/cancel?x=1"),
    }
    for name, response in refused.items():
        assert error_of(name, response) == f"{name} takes no query string, got 'x=1'"
    twice = httpx.get(f"{server.url}/v1/responses/{response_id}?stream=true&stream=false")
    assert error_of("/v1", twice) == "parameter 'stream' given more than once ('true' and 'false'); give it once"
    after = httpx.get(f"{server.url}/v1/responses/{response_id}?stream=true&starting_after=0&starting_after=1")
    assert error_of("/v1", after) == "parameter 'starting_after' given more than once ('0' and '1'); give it once"
    assert httpx.get(server.url + "/v1/models").status_code == 200
    no_traceback(server)


def test_metrics_sends_the_samples_name_asks_for(server: Server) -> None:
    scraped = httpx.get(server.url + "/metrics?name[]=tokenwire_streams_open&name[]=tokenwire_resumes_total")
    if server.name == "proxy":                       # an app made without metrics
        assert scraped.status_code == 404
        return
    samples = {line.split(" ")[0] for line in scraped.text.splitlines() if line and not line.startswith("#")}
    assert samples == {"tokenwire_streams_open", "tokenwire_resumes_total"}
    assert len(httpx.get(server.url + "/metrics").text) > len(scraped.text)
