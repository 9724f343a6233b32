"""Authorization: ``TokenStreams(model, authorize=...)`` on one uvicorn process (memory
log) and across two uvicorn processes on one real redis-server, with a bearer-token hook (``support.apps.auth``).

No credentials is a 401 with ``WWW-Authenticate``; Alice creates and reads her stream whole and her model saw her
request's headers; Bob reading or stopping Alice's stream gets the very 404 of an id that does not exist, on either
process; Alice reads and stops hers from the other process; a continuation on the other process keeps the principal
and the headers but those kept out of the log.  The same holds on /chat (a chat id names the asking principal's own
chat) and on the OpenAI routes, where the ``openai`` SDK's ``api_key`` is the bearer token.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.asgi import Uvicorn, read_stream, uvicorn
from support.docs import all_text
from support.redis import lease_expired, running_redis

from tokenwire.asgi import TokenStreams

ALICE = {"Authorization": "Bearer alice-token", "X-Tenant": "acme", "Cookie": "session=alice-cookie"}
BOB = {"Authorization": "Bearer bob-token"}
TEXT = "".join(f" t{i}" for i in range(30))
# Headers that differ between any two responses, whatever they answer.
_PER_RESPONSE = {"date", "server"}


@dataclass
class Pair:
    """Two ways in: ``a`` and ``b`` (the same process on the memory log, two processes on one Redis)."""

    a: Uvicorn
    b: Uvicorn
    calls: Path

    def made_calls(self, stream_id: str) -> list[dict[str, Any]]:
        lines = self.calls.read_text().splitlines() if self.calls.exists() else []
        return [call for call in map(json.loads, lines) if call["stream_id"] == stream_id]


@pytest.fixture(scope="module", params=["one process", "two processes on Redis"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    calls = tmp_path_factory.mktemp("auth") / "calls.jsonl"
    if request.param == "one process":
        with uvicorn("support.apps.auth:app", env={"TOKENWIRE_TEST_CALLS": str(calls)}) as one:
            yield Pair(one, one, calls)
        return
    with running_redis() as redis_server:
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?lease_ms=400&block_ms=50",
               "TOKENWIRE_TEST_CALLS": str(calls)}
        with uvicorn("support.apps.auth:app", env=env) as one, uvicorn("support.apps.auth:app", env=env) as other:
            yield Pair(one, other, calls)


def create(server: Uvicorn, headers: dict[str, str], query: str | None = None, mount: str = "/model") -> str:
    query = query or ("n=30&delay_ms=1" if mount == "/model" else "tokens=30&producer_ms=1")
    made = httpx.post(f"{server.url}{mount}/streams?{query}", headers=headers)
    assert made.status_code == 201, made.text
    return str(made.json()["stream_id"])


def answer(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    """What a client learns from ``response``: status, headers (but date and server), body."""
    headers = [(k.decode(), v.decode()) for k, v in response.headers.raw if k.decode().lower() not in _PER_RESPONSE]
    return response.status_code, headers, response.content


@pytest.mark.parametrize("mount", ["/model", "/canned"])
def test_no_credentials_is_a_401_with_a_challenge_on_every_route(pair: Pair, mount: str) -> None:
    stream_id = create(pair.a, ALICE, mount=mount)
    for method, path, action in (("POST", "/streams", "create"), ("GET", "/stream", "create"),
                                 ("GET", f"/streams/{stream_id}/events", "read")):
        for headers in ({}, {"Authorization": "Bearer nobody-token"}, {"Authorization": "Basic YWxpY2U6"}):
            for server in (pair.a, pair.b):
                got = httpx.request(method, f"{server.url}{mount}{path}", headers=headers)
                assert got.status_code == 401, (method, path, headers)
                assert got.headers["www-authenticate"] == 'Bearer realm="tokenwire"'
                assert got.json() == {"error": f"credentials needed to {action}: the request carries none this "
                                               f"server accepts"}


def test_a_permission_error_is_a_403_with_its_message(pair: Pair) -> None:
    got = httpx.post(f"{pair.b.url}/model/streams", headers={"Authorization": "Bearer mallory-token"})
    assert got.status_code == 403
    assert got.json() == {"error": "not allowed to create: mallory may not use this service"}
    assert "www-authenticate" not in got.headers


def test_alice_reads_her_stream_whole_on_either_process_and_her_model_saw_her_headers(pair: Pair) -> None:
    stream_id = create(pair.a, ALICE)
    for server in (pair.b, pair.a):
        read = read_stream(f"{server.url}/model/streams/{stream_id}/events", headers=ALICE)
        assert read.ids == list(range(30)) and read.text == TEXT and read.last.event == "done"
    [call] = pair.made_calls(stream_id)
    assert call["principal"] == "alice" and call["start"] == 0
    assert {k: call["headers"][k] for k in ("authorization", "x-tenant", "cookie")} == {
        "authorization": "Bearer alice-token", "x-tenant": "acme", "cookie": "session=alice-cookie"}
    assert call["headers"]["host"] == pair.a.url.removeprefix("http://")      # every header, names lower-case


@pytest.mark.parametrize("mount", ["/model", "/canned"])
def test_bob_gets_the_404_of_an_id_that_does_not_exist_on_either_process(pair: Pair, mount: str) -> None:
    stream_id = create(pair.a, ALICE, mount=mount)
    never = "x" * len(stream_id)                         # an id no stream has, of the same length
    for server in (pair.a, pair.b):
        bobs = httpx.get(f"{server.url}{mount}/streams/{stream_id}/events", headers=BOB)
        unknown = httpx.get(f"{server.url}{mount}/streams/{never}/events", headers=BOB)
        status, headers, body = answer(unknown)
        assert status == 404
        assert answer(bobs) == (status, headers, body.replace(never.encode(), stream_id.encode()))
        assert bobs.json()["error"].startswith(f"unknown stream {stream_id!r}: never created here")
    read = read_stream(f"{pair.b.url}{mount}/streams/{stream_id}/events", headers=ALICE)   # still Alice's
    assert read.ids == list(range(30)) and read.last.event == "done"


def test_a_stream_made_by_get_stream_is_its_creators(pair: Pair) -> None:
    read = read_stream(f"{pair.a.url}/model/stream?n=3&delay_ms=1", headers=ALICE)
    stream_id = json.loads(read.events[0].data)["stream_id"]
    assert httpx.get(f"{pair.b.url}/model/streams/{stream_id}/events", headers=BOB).status_code == 404
    again = read_stream(f"{pair.b.url}/model/streams/{stream_id}/events", headers=ALICE)
    assert again.text == " t0 t1 t2"


def test_a_continuation_keeps_the_principal_and_the_headers_but_those_kept_out_of_the_log(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    with running_redis() as redis_server:
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?lease_ms=400&block_ms=50",
               "TOKENWIRE_TEST_CALLS": str(calls)}
        with uvicorn("support.apps.auth:app", env=env) as one, uvicorn("support.apps.auth:app", env=env) as other:
            pair = Pair(one, other, calls)
            stream_id = create(one, ALICE, "n=60&delay_ms=30")
            url = f"/model/streams/{stream_id}/events"
            first = read_stream(one.url + url, headers=ALICE, stop_after=5)
            one.stop(signal.SIGKILL)                                  # the owner dies mid-answer
            lease_expired(redis_server.url, stream_id)                # its lease (400 ms) runs out
            assert httpx.get(other.url + url, headers=BOB).status_code == 404
            rest = read_stream(other.url + url, headers={**ALICE, "Last-Event-ID": first.tokens[-1].id},
                               timeout_s=20)
            assert httpx.get(other.url + url, headers=BOB).status_code == 404      # still Alice's after it
    assert first.text + rest.text == "".join(f" t{i}" for i in range(60))
    made, continued = pair.made_calls(stream_id)
    assert made["start"] == 0 and continued["start"] >= 5
    assert made["principal"] == continued["principal"] == "alice"
    assert {"authorization", "cookie"} <= set(made["headers"])
    kept = {k: v for k, v in made["headers"].items() if k not in ("authorization", "cookie")}
    assert continued["headers"] == kept and continued["headers"]["x-tenant"] == "acme"


@pytest.mark.parametrize(("host", "open_"), [("0.0.0.0", True), ("127.0.0.1", False)])
def test_tokenwire_serve_says_it_is_open_when_bound_beyond_loopback(host: str, open_: bool) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "serve", "--host", host, "--port", "0", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    try:
        lines = [proc.stdout.readline() for _ in range(4)]          # the banner's own four lines
        assert lines[0].startswith(f"tokenwire serving on http://{host}:") and lines[3].startswith("token log: ")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    said = "".join(lines) + proc.stdout.read()
    proc.stdout.close()
    warning = ("open to anyone who can reach it: tokenwire serve has no authorization (whoever holds a stream's id "
               "reads it); put TokenStreams(authorize=...) in front of real users")
    assert (warning in said) is open_


@pytest.mark.parametrize(("host", "open_"), [("0.0.0.0", True), ("127.0.0.1", False)])
def test_tokenwire_proxy_says_it_is_open_by_its_own_name_when_bound_beyond_loopback(host: str, open_: bool) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "proxy", "--upstream", "http://127.0.0.1:9/v1",
                             "--host", host, "--port", "0", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline()                              # printed once it listens
        assert first.startswith(f"tokenwire proxy serving on http://{host}:")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    said = first + proc.stdout.read()
    proc.stdout.close()
    warning = ("open to anyone who can reach it: tokenwire proxy has no authorization (whoever holds a stream's id "
               "reads it, and anyone may ask your upstream, with its key); put TokenStreams(authorize=...) in front "
               "of real users")
    assert (warning in said) is open_


def test_a_chat_is_its_creators_and_a_chat_id_names_the_asking_principals_own(pair: Pair) -> None:
    body = {"id": "chat-1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
            "trigger": "submit-message"}
    assert httpx.post(f"{pair.a.url}/model/chat", json=body).status_code == 401
    with httpx.Client(timeout=10) as client, client.stream("POST", f"{pair.a.url}/model/chat", json=body,
                                                          headers=ALICE) as made:
        assert made.status_code == 200
        stream_id = made.headers["x-workflow-run-id"]
        first = b"".join(made.iter_bytes())
    assert b'"type":"finish"' in first.replace(b" ", b"")
    never = "x" * len(stream_id)
    bobs = httpx.get(f"{pair.b.url}/model/chat/{stream_id}/stream?startIndex=0", headers=BOB)
    unknown = httpx.get(f"{pair.b.url}/model/chat/{never}/stream?startIndex=0", headers=BOB)
    status, headers, text = answer(unknown)
    assert status == 404 and answer(bobs) == (status, headers, text.replace(never.encode(), stream_id.encode()))
    bobs_chat = httpx.get(f"{pair.b.url}/model/chat/chat-1/stream?startIndex=0", headers=BOB)
    assert bobs_chat.status_code == 404                                   # Bob has no chat named chat-1
    bobs_own = httpx.post(f"{pair.b.url}/model/chat", json=body, headers=BOB, timeout=10)   # his own chat-1
    assert bobs_own.status_code == 200 and bobs_own.headers["x-workflow-run-id"] != stream_id
    alices = httpx.get(f"{pair.b.url}/model/chat/chat-1/stream?startIndex=0", headers=ALICE)
    assert alices.status_code == 200 and alices.content == first          # hers still
    bobs_chat = httpx.get(f"{pair.a.url}/model/chat/chat-1/stream?startIndex=0", headers=BOB)
    assert bobs_chat.headers["x-workflow-run-id"] == bobs_own.headers["x-workflow-run-id"]


def test_bob_stopping_alices_stream_gets_the_404_of_an_unknown_id_and_alice_stops_it_from_the_other_process(
        pair: Pair) -> None:
    stream_id = create(pair.a, ALICE, "n=400&delay_ms=20")             # thinks for 8 s: still going when stopped
    never = "x" * len(stream_id)
    for server in (pair.a, pair.b):
        bobs = httpx.post(f"{server.url}/model/streams/{stream_id}/stop", headers=BOB)
        unknown = httpx.post(f"{server.url}/model/streams/{never}/stop", headers=BOB)
        status, headers, body = answer(unknown)
        assert status == 404
        assert answer(bobs) == (status, headers, body.replace(never.encode(), stream_id.encode()))
    assert httpx.post(f"{pair.b.url}/model/streams/{stream_id}/stop").status_code == 401
    first = read_stream(f"{pair.a.url}/model/streams/{stream_id}/events", headers=ALICE, stop_after=3)
    assert first.ids == [0, 1, 2]                                      # Bob's stops stopped nothing
    stopped = httpx.post(f"{pair.b.url}/model/streams/{stream_id}/stop", headers=ALICE)
    assert stopped.status_code == 200 and stopped.json() == {"stream_id": stream_id, "state": "stopped"}
    rest = read_stream(f"{pair.a.url}/model/streams/{stream_id}/events", headers={**ALICE, "Last-Event-ID": "2"})
    assert rest.last.event == "done" and rest.last_json()["stopped_early"] is True
    assert rest.last_json()["reason"] == "stopped" and rest.last_json()["tokens"] < 400


def test_the_openai_sdks_api_key_is_the_bearer_token_and_a_response_is_its_creators(pair: Pair) -> None:
    def client(server: Uvicorn, key: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{server.url}/model/v1", api_key=key, max_retries=0, timeout=30)

    hello = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.AuthenticationError) as unknown_key:
        client(pair.a, "nobody-token").chat.completions.create(model="any", messages=hello)  # type: ignore[arg-type]
    assert unknown_key.value.status_code == 401 and unknown_key.value.body == {
        "message": "credentials needed to create: the request carries none this server accepts",
        "type": "invalid_request_error", "code": None}
    with pytest.raises(openai.PermissionDeniedError) as forbidden:
        client(pair.a, "mallory-token").responses.create(model="any", input="hi")
    assert forbidden.value.status_code == 403
    made = client(pair.a, "alice-token").responses.create(model="any", input="hi", background=True)
    never = made.id[:5] + "x" * (len(made.id) - 5)                          # resp_ and an id nobody made
    for server in (pair.a, pair.b):
        bobs = httpx.get(f"{server.url}/model/v1/responses/{made.id}", headers=BOB)
        unknown = httpx.get(f"{server.url}/model/v1/responses/{never}", headers=BOB)
        status, headers, body = answer(unknown)
        assert status == 404 and answer(bobs) == (status, headers, body.replace(never.encode(), made.id.encode()))
        with pytest.raises(openai.NotFoundError):
            client(server, "bob-token").responses.retrieve(made.id)
    events = list(client(pair.b, "alice-token").responses.retrieve(made.id, stream=True))
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "".join(f" t{i}" for i in range(20))


def test_bob_can_neither_stop_alices_chat_nor_cancel_her_response_and_alice_can(pair: Pair) -> None:
    body = {"id": "long-chat", "trigger": "submit-message", "n": 400, "delay_ms": 20,      # 8 s of thinking
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "go on"}]}]}
    with httpx.Client(timeout=10) as client, client.stream("POST", f"{pair.a.url}/model/chat",
                                                          json=body, headers=ALICE) as made:
        stream_id = made.headers["x-workflow-run-id"]
    response = openai.OpenAI(base_url=f"{pair.a.url}/model/v1", api_key="alice-token", max_retries=0).responses.create(
        model="any", input="go on", background=True)
    for server in (pair.a, pair.b):
        for path in ("/model/chat/long-chat/stop", f"/model/chat/{stream_id}/stop",
                     f"/model/v1/responses/{response.id}/cancel"):
            assert httpx.post(server.url + path, headers=BOB).status_code == 404, path
    assert httpx.get(f"{pair.b.url}/model/v1/responses/{response.id}", headers=ALICE).json()["status"] in (
        "queued", "in_progress", "completed")
    stopped = httpx.post(f"{pair.b.url}/model/chat/long-chat/stop", headers=ALICE)
    assert stopped.status_code == 200 and stopped.json() == {"stream_id": stream_id, "state": "stopped"}
    cancelled = httpx.post(f"{pair.b.url}/model/v1/responses/{response.id}/cancel", headers=ALICE)
    assert cancelled.status_code == 200 and cancelled.json()["id"] == response.id


def test_a_server_without_the_hook_on_the_same_redis_asks_nobody_and_the_docs_say_so(redis_server: Any) -> None:
    """The owner check is the hook's: an open server pointed at the users' Redis reads their streams."""
    owned = TokenStreams(log=redis_server.url, authorize=lambda access: "alice")
    open_ = TokenStreams(log=redis_server.url)

    async def read_alices_stream_openly() -> tuple[int, str]:
        async with owned.lifespan(), open_.lifespan():
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=owned), base_url="http://t") as client:
                made = await client.post("/streams?tokens=3")
                assert made.status_code == 201, made.text
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=open_), base_url="http://t") as client:
                read = await client.get(made.json()["events_url"])
        return read.status_code, read.text

    status, text = asyncio.run(read_alices_stream_openly())
    assert status == 200 and "event: done" in text
    said = " ".join(all_text().split())
    assert ("A server without one (`tokenwire serve`, `uvicorn tokenwire.asgi:app`, a `TokenStreams` without "
            "`authorize`) asks nobody, on that Redis too") in said
