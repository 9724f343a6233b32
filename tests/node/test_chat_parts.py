"""The AI SDK's own clients reading a message with every kind of part from ``/chat``: ai@6's
``DefaultChatTransport`` + ``readUIMessageStream`` and @workflow/ai@6's ``WorkflowChatTransport``, driven from node
(``chat_parts_client.mjs``), against ``TokenStreams(model)`` under uvicorn with a model that yields typed parts
(``support.apps.chat_tools``): reasoning, text, a tool call with its input in pieces, its output and a second
step.  Read directly and after a resume in the middle of the call's arguments, on the memory log and on two
instances sharing one redis-server, each reader assembles the same message, every chunk once; a chat whose last
message carries the client's tool output reaches the model as tool calls and tool results, and the answer goes on
with that message."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.asgi import Uvicorn, uvicorn
from support.redis import running_redis
from support.requirements import ROOT, require_ai_sdk

DRIVER = ROOT / "tests" / "support" / "chat_parts_client.mjs"
TIMEOUT_S = 60
APP = "support.apps.chat_tools:app"
# Every chunk of the model's answer (support.apps.chat_tools.ANSWER), in order.
CHUNKS = ["start", "start-step", "reasoning-start", "reasoning-delta", "reasoning-delta", "reasoning-end",
          "text-start", "text-delta", "text-delta", "text-end", "tool-input-start", *["tool-input-delta"] * 4,
          "tool-input-available", "tool-output-available", "finish-step", "start-step", "text-start",
          *["text-delta"] * 3, "source-url", "text-end", "finish-step", "finish"]
# The parts readUIMessageStream assembles of it.
PARTS: list[dict[str, Any]] = [
    {"type": "step-start"},
    {"type": "reasoning", "id": "reasoning-0", "text": "The user asks about the weather.", "state": "done"},
    {"type": "text", "text": "Let me check. ", "state": "done"},
    {"type": "tool-get_weather", "toolCallId": "call_1", "state": "output-available", "input": {"city": "Paris"},
     "output": {"celsius": 21}},
    {"type": "step-start"},
    {"type": "text", "text": "It is 21 degrees in Paris.", "state": "done"},
    {"type": "source-url", "sourceId": "s1", "url": "https://example.org/paris", "title": "Paris"}]
USAGE = {"usage": {"inputTokens": 34, "outputTokens": 18, "totalTokens": 52, "reasoningTokens": 6,
                   "cachedInputTokens": 0}}
# cut_after counts the entries a connection sends: 7 ends the POST after the call's second argument piece.
CUT_IN_ARGUMENTS = 7
# ... which is chunk 12: the workflow transport comes back for chunk 13, the third piece.
RESUMED_AT = 13


def drive(**job: Any) -> dict[str, Any]:
    """Run one job of the node driver; returns what it saw."""
    done = subprocess.run(["node", str(DRIVER), str(require_ai_sdk()), json.dumps(job)], capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def assert_whole(message: dict[str, Any], stream_id: str) -> None:
    assert message == {"id": f"msg-{stream_id}", "metadata": USAGE, "role": "assistant", "parts": PARTS}


@pytest.fixture(scope="module")
def app() -> Iterator[Uvicorn]:
    with uvicorn(APP) as server:
        yield server


@pytest.mark.parametrize("transport", ["default", "workflow"])
def test_a_message_with_reasoning_a_tool_call_its_output_and_a_second_step_is_read_whole(
        app: Uvicorn, transport: str) -> None:
    seen = drive(transport=transport, api=f"{app.url}/tools/chat", chatId=f"whole-{transport}", body={})
    assert seen["errors"] == [] and seen["chunks"] == [CHUNKS]
    assert_whole(seen["messages"][0], seen["runId"])
    assert [r[0] for r in seen["requests"]] == ["POST"]


def _cut_in_the_arguments(api: str, rewrite: list[str] | None = None) -> dict[str, Any]:
    seen = drive(transport="workflow", api=api, chatId="unused", body={"cut_after": CUT_IN_ARGUMENTS, "delay_ms": 20},
                 rewrite=rewrite)
    assert seen["errors"] == []
    assert seen["requests"] == [["POST", "/tools/chat", 200],
                                ["GET", f"/tools/chat/{seen['runId']}/stream?startIndex={RESUMED_AT}", 200]]
    assert seen["chunks"] == [CHUNKS]                   # every chunk once: no gap, no repeat
    assert_whole(seen["messages"][0], seen["runId"])
    return seen


def _aborted_in_the_arguments(api: str, chat_id: str, rewrite: list[str] | None = None) -> dict[str, Any]:
    seen = drive(transport="default", api=api, chatId=chat_id, body={"delay_ms": 30},
                 abortAt=["tool-input-delta", 2], rewrite=rewrite)
    partial, again = seen["chunks"]
    assert len(partial) in (13, 14) and partial == CHUNKS[:len(partial)]     # the abort lets a chunk in flight in
    call = seen["messages"][0]["parts"][-1]
    assert (call["type"], call["state"]) == ("tool-get_weather", "input-streaming")
    assert call["rawInput"] in ('{"city": ', '{"city": "Par')                  # inside the arguments
    assert again == CHUNKS                              # the reconnect: the whole message again, then live
    assert_whole(seen["messages"][1], seen["runId"])
    assert seen["requests"][1] == ["GET", f"/tools/chat/{chat_id}/stream", 200]
    return seen


def test_the_workflow_transport_resumes_in_the_middle_of_the_tool_calls_arguments(app: Uvicorn) -> None:
    _cut_in_the_arguments(f"{app.url}/tools/chat")


def test_the_default_transport_aborted_in_the_arguments_reconnects_to_the_whole_message(app: Uvicorn) -> None:
    _aborted_in_the_arguments(f"{app.url}/tools/chat", "aborted")


def test_the_clients_tool_output_reaches_the_model_and_the_answer_goes_on_with_its_message(app: Uvicorn) -> None:
    asked = [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Ask me first."}]},
             {"id": "a1", "role": "assistant", "parts": [
                 {"type": "step-start"},
                 {"type": "tool-confirm", "toolCallId": "c0", "state": "output-available", "input": {"q": "go?"},
                  "output": "yes"}]}]
    seen = drive(transport="default", api=f"{app.url}/tools/chat", chatId="confirmed", messages=asked,
                 body={"model": "any-model", "tools": {"get_weather": {"description": "the weather"}}})
    assert seen["errors"] == [] and seen["chunks"] == [CHUNKS]
    message = seen["messages"][0]
    assert message["id"] == "a1" and message["parts"] == [*asked[1]["parts"], *PARTS]   # added to it, once
    given = httpx.get(f"{app.url}/seen/{seen['runId']}").json()
    assert given == {"chat_messages": [
        {"role": "user", "content": "Ask me first."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "confirm", "arguments": '{"q": "go?"}'}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "yes"}],
        "continues": "a1", "model": "any-model", "tools": {"get_weather": {"description": "the weather"}}}
    replayed = httpx.get(f"{app.url}/tools/chat/{seen['runId']}/stream?startIndex=0", timeout=TIMEOUT_S)
    first = json.loads(replayed.text.split("data: ", 2)[1].split("\n", 1)[0])
    assert first == {"type": "start", "messageId": "a1"}                       # a replay names the same message


@contextlib.contextmanager
def two_on_redis() -> Iterator[tuple[Uvicorn, Uvicorn]]:
    """Two uvicorn processes of the tool model's app on one redis-server."""
    with running_redis() as redis_server:
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?block_ms=50"}
        with uvicorn(APP, env=env) as one, uvicorn(APP, env=env) as other:
            yield one, other


def test_two_instances_on_one_redis_resume_each_others_messages_in_the_arguments() -> None:
    with two_on_redis() as (one, other):
        rewrite = [one.url, other.url]
        cut = _cut_in_the_arguments(f"{one.url}/tools/chat", rewrite)
        assert cut["hosts"] == [one.url, other.url]
        aborted = _aborted_in_the_arguments(f"{one.url}/tools/chat", "redis-aborted", rewrite)
        assert aborted["hosts"] == [one.url, other.url]
        direct = drive(transport="workflow", api=f"{other.url}/tools/chat", chatId="unused", body={})
        assert direct["chunks"] == [CHUNKS]
        assert_whole(direct["messages"][0], direct["runId"])
