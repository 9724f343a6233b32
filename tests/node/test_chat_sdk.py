"""The AI SDK's own chat transports against tokenwire's ``/chat``: ai@6's ``DefaultChatTransport`` and
@workflow/ai@6's ``WorkflowChatTransport``, driven from node (``chat_client.mjs``) with ``readUIMessageStream``.

Each runs against ``tokenwire serve`` (the canned answer), the ASGI app's canned answer and a user's model
(``support.apps.chat``), and each time the text is assembled exactly once: one text part holding exactly the answer.
``.ci/run`` installs the packages into ``.ci/node``; without Node or them the tests skip, and fail under
``TOKENWIRE_REQUIRE_ALL=1``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.apps.chat import SECRET
from support.asgi import Uvicorn, uvicorn
from support.live import serving, wait_until
from support.redis import running_redis
from support.requirements import ROOT, require_ai_sdk

from tokenwire.core.model import ANSWER

DRIVER = ROOT / "tests" / "support" / "chat_client.mjs"
TIMEOUT_S = 60
KINDS = ("serve", "asgi", "model")
PREAMBLE = ["start", "start-step", "text-start"]
ENDING = ["text-end", "finish-step", "finish"]


def drive(**job: Any) -> dict[str, Any]:
    """Run one job of the node driver; returns what it saw."""
    done = subprocess.run(["node", str(DRIVER), str(require_ai_sdk()), json.dumps(job)], capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    seen: dict[str, Any] = json.loads(done.stdout)
    seen["stdout"] = done.stdout
    return seen


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    with serving() as live, uvicorn("support.apps.chat:app") as app:
        yield {"serve": live.url + "/chat", "asgi": app.url + "/canned/chat", "model": app.url + "/model/chat",
               "app": app.url}


def body(kind: str, tokens: int, ms: float, **extra: Any) -> dict[str, Any]:
    """The body fields that shape the answer: the report's parameters, or the chat model's own."""
    if kind == "model":
        return {"n": tokens, "delay_ms": ms, **extra}
    return {"tokens": tokens, "producer_ms": ms, **extra}


def expected(kind: str, tokens: int) -> str:
    return "".join(f" t{i}" for i in range(tokens)) if kind == "model" else "".join(ANSWER[:tokens])


def whole(tokens: int) -> list[str]:
    return [*PREAMBLE, *["text-delta"] * tokens, *ENDING]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("transport", ["default", "workflow"])
def test_send_assembles_the_answer_once(servers: dict[str, str], kind: str, transport: str) -> None:
    chat_id = f"send-{kind}-{transport}"
    seen = drive(transport=transport, api=servers[kind], chatId=chat_id, body=body(kind, 40, 0.5))
    assert seen["errors"] == []
    assert seen["texts"] == [expected(kind, 40)] and seen["textParts"] == [1]
    assert seen["chunks"] == whole(40)
    assert [r[0] for r in seen["requests"]] == ["POST"]           # finished on the POST: no reconnect
    stream_id = seen["messageId"].removeprefix("msg-")
    if kind == "model":
        given = httpx.get(f"{servers['app']}/seen/{stream_id}").json()
        # the default transport names its chat; the workflow transport sends {messages} only
        assert given == {"chat_id": chat_id if transport == "default" else None, "messages": 1,
                         "trigger": "submit-message" if transport == "default" else None, "yielded": 40,
                         "finished": True, "closed": True}


@pytest.mark.parametrize("kind", KINDS)
def test_abort_after_a_few_deltas_then_reconnect_replays_from_start(servers: dict[str, str], kind: str) -> None:
    chat_id = f"abort-{kind}"
    seen = drive(transport="default", api=servers[kind], chatId=chat_id, body=body(kind, 200, 10), abortAfter=3,
                 reconnect=True)
    answer = expected(kind, 200)
    assert seen["reconnected"] is True
    partial, resumed = seen["texts"]
    assert answer.startswith(partial) and len(partial) < len(answer)
    assert resumed == answer and seen["textParts"] == [1, 1]
    again = seen["chunks"].index("start", 1)                     # the abort lets a chunk in flight through
    assert seen["chunks"][:again] in ([*PREAMBLE, *["text-delta"] * n] for n in (3, 4))
    assert seen["chunks"][again:] == whole(200)                   # the resume: a replay from start, then live
    assert seen["requests"][1] == ["GET", f"/{_mount(kind)}chat/{chat_id}/stream", 200]


def _mount(kind: str) -> str:
    return {"serve": "", "asgi": "canned/", "model": "model/"}[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_reconnect_is_204_for_a_chat_that_never_started_and_for_one_that_finished(servers: dict[str, str],
                                                                                   kind: str) -> None:
    never = drive(transport="default", api=servers[kind], chatId=f"never-{kind}", only="reconnect")
    assert never["reconnected"] is False
    assert never["requests"] == [["GET", f"/{_mount(kind)}chat/never-{kind}/stream", 204]]
    chat_id = f"finished-{kind}"
    finished = drive(transport="default", api=servers[kind], chatId=chat_id, body=body(kind, 5, 0.5),
                     reconnect=True)
    assert finished["texts"] == [expected(kind, 5)] and finished["reconnected"] is False
    assert finished["requests"][1] == ["GET", f"/{_mount(kind)}chat/{chat_id}/stream", 204]


@pytest.mark.parametrize("kind", KINDS)
def test_the_workflow_transport_resumes_by_itself_after_the_server_cuts_the_post(servers: dict[str, str],
                                                                                  kind: str) -> None:
    seen = drive(transport="workflow", api=servers[kind], chatId=f"cut-{kind}", body=body(kind, 30, 2, cut_after=7))
    stream_id = seen["messageId"].removeprefix("msg-")
    assert seen["requests"] == [["POST", f"/{_mount(kind)}chat", 200],
                                ["GET", f"/{_mount(kind)}chat/{stream_id}/stream?startIndex=10", 200]]
    assert seen["texts"] == [expected(kind, 30)] and seen["textParts"] == [1]
    assert seen["chunks"] == whole(30)                            # every chunk once: the cut left no gap, no repeat


def test_a_model_error_arrives_as_the_sdks_error_chunk(servers: dict[str, str]) -> None:
    for transport in ("default", "workflow"):
        seen = drive(transport=transport, api=servers["model"], chatId=f"error-{transport}",
                     body=body("model", 10, 1, mode="raise", at=3))
        assert seen["chunks"] == [*PREAMBLE, "text-delta", "text-delta", "text-delta", "text-end", "error",
                                  "finish-step", "finish"]
        assert seen["errors"] == ["the model raised RuntimeError"]    # the type only: never its message
        assert seen["texts"] == [" t0 t1 t2"]
        assert SECRET not in seen["stdout"]


@contextlib.contextmanager
def two_on_redis() -> Iterator[tuple[Uvicorn, Uvicorn]]:
    """Two uvicorn processes of ``support.apps.chat`` on one redis-server."""
    with running_redis() as redis_server:
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?block_ms=50"}
        with uvicorn("support.apps.chat:app", env=env) as one, uvicorn("support.apps.chat:app", env=env) as other:
            yield one, other


@pytest.mark.parametrize("kind", ["asgi", "model"])
def test_two_instances_on_one_redis_resume_each_others_chats(kind: str) -> None:
    with two_on_redis() as (one, other):
        api = f"{one.url}/{_mount(kind)}chat"
        rewrite = [one.url, other.url]
        aborted = drive(transport="default", api=api, chatId=f"redis-{kind}", body=body(kind, 200, 10),
                        abortAfter=3, reconnect=True, rewrite=rewrite)
        assert aborted["texts"][1] == expected(kind, 200) and aborted["textParts"] == [1, 1]
        assert aborted["requests"][1] == ["GET", f"/{_mount(kind)}chat/redis-{kind}/stream", 200]
        assert aborted["hosts"] == [one.url, other.url]
        cut = drive(transport="workflow", api=api, chatId="unused", body=body(kind, 30, 2, cut_after=7),
                    rewrite=rewrite)
        assert cut["texts"] == [expected(kind, 30)] and cut["chunks"] == whole(30)
        assert [r[2] for r in cut["requests"]] == [200, 200] and cut["hosts"] == [one.url, other.url]
        finished = drive(transport="default", api=api, chatId=f"redis-{kind}", only="reconnect", rewrite=rewrite)
        assert finished["requests"] == [["GET", f"/{_mount(kind)}chat/redis-{kind}/stream", 204]]


def test_a_model_error_reaches_a_reader_on_another_instance_as_the_same_error_chunk() -> None:
    """The failure is kept with the stream's state in Redis: a reconnect to the other instance ends the same way."""
    with two_on_redis() as (one, other):
        seen = drive(transport="default", api=f"{one.url}/model/chat", chatId="error-elsewhere",
                     body=body("model", 200, 20, mode="raise", at=40), abortAfter=3, reconnect=True,
                     rewrite=[one.url, other.url])
    assert seen["hosts"] == [one.url, other.url] and seen["requests"][1][2] == 200
    assert seen["chunks"][-4:] == ["text-end", "error", "finish-step", "finish"]
    assert seen["errors"][-1] == "the model raised RuntimeError" and SECRET not in seen["stdout"]   # after the abort's
    assert seen["texts"][-1] == expected("model", 40)


@pytest.mark.parametrize("transport", ["default", "workflow"])
def test_a_stop_from_another_instance_ends_the_readers_stream_with_finish(transport: str) -> None:
    """The default transport's stop names the chat, the workflow transport's its stream (it names no chat)."""
    with two_on_redis() as (one, other):
        chat_id = f"stop-{transport}"
        named = chat_id if transport == "default" else "{runId}"
        seen = drive(transport=transport, api=f"{one.url}/model/chat", chatId=chat_id,
                     body=body("model", 2000, 20), stopAfter=3, stopUrl=f"{other.url}/model/chat/{named}/stop")
        stream_id = seen["messageId"].removeprefix("msg-")
        assert seen["requests"][1] == ["POST", f"/model/chat/{named.replace('{runId}', stream_id)}/stop", 200]
        assert seen["chunks"][-3:] == ["text-end", "finish-step", "finish"] and seen["errors"] == []
        assert seen["stopMs"] is not None and seen["stopMs"] < 2000
        deltas = seen["chunks"].count("text-delta")
        assert seen["texts"] == [expected("model", deltas)] and 3 <= deltas < 2000
        assert [r[0] for r in seen["requests"]] == ["POST", "POST"]        # finished: no reconnect
        wait_until(lambda: httpx.get(f"{one.url}/seen/{stream_id}").json()["closed"], "the model's iterator closed")
        assert httpx.get(f"{one.url}/seen/{stream_id}").json()["finished"] is False
        by_chat = httpx.post(f"{other.url}/model/chat/{chat_id}/stop").status_code
        assert by_chat == (200 if transport == "default" else 404)     # the workflow transport named no chat
        assert httpx.post(f"{other.url}/model/chat/{stream_id}/stop").status_code == 200   # twice: harmless
        assert httpx.post(f"{other.url}/model/chat/nobody/stop").status_code == 404
