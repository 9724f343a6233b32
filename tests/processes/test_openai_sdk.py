"""The real ``openai`` SDK against tokenwire's OpenAI wire: chat completions, background responses resumed, models.

Every test runs against ``tokenwire serve`` (the canned answer),
``uvicorn tokenwire.asgi:app`` (the same, as an ASGI app) and a user's model
(``support.apps.openai_wire``), each on the memory log and on one redis-server.  On Redis there are two
instances of each server, and a response made on the first is retrieved on the second.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
from support.asgi import uvicorn
from support.docs import code_block, section
from support.instances import BLOCK_MS, LEASE_MS, Instance
from support.live import serving
from support.redis import RedisServer

from tokenwire.core.model import ANSWER

KINDS = ("serve", "asgi", "model")
LOGS = ("memory", "redis")
PREAMBLE = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
ENDING = ["response.output_text.done", "response.content_part.done", "response.output_item.done"]


@dataclass(frozen=True)
class Target:
    """Where a kind of server answers: ``first`` makes a response, ``second`` (another instance on Redis) reads it."""

    kind: str
    first: str
    second: str

    def client(self, which: str = "first") -> openai.OpenAI:
        return openai.OpenAI(base_url=getattr(self, which), api_key="unused", max_retries=0, timeout=30)

    def body(self, tokens: int, ms: float = 1, **extra: Any) -> dict[str, Any]:
        """The body fields that shape the answer: the report's parameters, or the test model's own."""
        if self.kind == "model":
            return {"n": tokens, "delay_ms": ms, **extra}
        return {"tokens": tokens, "producer_ms": ms, **extra}

    def text(self, tokens: int) -> str:
        return "".join(f" w{i}" for i in range(tokens)) if self.kind == "model" else "".join(ANSWER[:tokens])


@contextmanager
def _servers(log: str, redis: RedisServer | None) -> Iterator[dict[str, Target]]:
    with ExitStack() as stack:
        if log == "memory":
            live = stack.enter_context(serving())
            canned = stack.enter_context(uvicorn("tokenwire.asgi:app"))
            app = stack.enter_context(uvicorn("support.apps.openai_wire:app"))
            urls = {"serve": (live.url,) * 2, "asgi": (canned.url,) * 2, "model": (app.url + "/model",) * 2}
        else:
            assert redis is not None
            url = f"{redis.url}?lease_ms={LEASE_MS}&block_ms={BLOCK_MS}"
            serves = [Instance(redis.url, name) for name in ("a", "b")]
            for one in serves:
                stack.callback(one.kill)
            env = {"TOKENWIRE_LOG_URL": url}
            canned = [stack.enter_context(uvicorn("tokenwire.asgi:app", env=env)) for _ in "ab"]
            apps = [stack.enter_context(uvicorn("support.apps.openai_wire:app", env=env)) for _ in "ab"]
            urls = {"serve": tuple(f"http://127.0.0.1:{one.port}" for one in serves),
                    "asgi": tuple(app.url for app in canned),
                    "model": tuple(app.url + "/model" for app in apps)}
        yield {kind: Target(kind, first + "/v1", second + "/v1") for kind, (first, second) in urls.items()}


@pytest.fixture(scope="module", params=LOGS)
def servers(request: pytest.FixtureRequest) -> Iterator[dict[str, Target]]:
    redis = request.getfixturevalue("redis_session") if request.param == "redis" else None
    with _servers(request.param, redis) as targets:
        yield targets


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, servers: dict[str, Target]) -> Target:
    return servers[request.param]


MESSAGES = [{"role": "user", "content": "Say something."}]


def test_chat_completion_streamed(target: Target) -> None:
    chunks = list(target.client().chat.completions.create(
        model="any", messages=MESSAGES, stream=True, stream_options={"include_usage": True},
        extra_body=target.body(9)))
    deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
    assert deltas[0].role == "assistant"
    assert "".join(delta.content or "" for delta in deltas) == target.text(9)
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices] == [None] * 10 + ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 9
    assert {chunk.model for chunk in chunks} == {"any"} and len({chunk.id for chunk in chunks}) == 1


def test_chat_completion_whole(target: Target) -> None:
    completion = target.client().chat.completions.create(model="any", messages=MESSAGES,
                                                         extra_body=target.body(7))
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == target.text(7)
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens == 7


def _read(stream: Any, count: int | None = None) -> list[Any]:
    """The events of ``stream``, all or the first ``count`` deltas' worth (then the connection is dropped)."""
    events = []
    deltas = 0
    for event in stream:
        events.append(event)
        deltas += event.type == "response.output_text.delta"
        if count is not None and deltas == count:
            stream.close()
            break
    return events


def _check_whole(events: list[Any], text: str, tokens: int) -> None:
    """``events`` are the response's whole sequence: numbered 0.. with no gap, and the text exact."""
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert [event.type for event in events] == [*PREAMBLE, *["response.output_text.delta"] * tokens, *ENDING,
                                                "response.completed"]
    assert "".join(event.delta for event in events if event.type == "response.output_text.delta") == text
    assert events[-1].response.status == "completed" and events[-1].response.output_text == text


def test_background_response_dropped_then_retrieved_after_n(target: Target) -> None:
    client = target.client()
    stream = client.responses.create(model="any", input="Say something.", background=True, stream=True,
                                     extra_body=target.body(30, 20))
    first = _read(stream, 3)
    assert first[-1].type == "response.output_text.delta"
    after = first[-1].sequence_number
    rest = _read(target.client("second").responses.retrieve(first[0].response.id, stream=True,
                                                             starting_after=after))
    assert rest[0].sequence_number == after + 1
    _check_whole(first + rest, target.text(30), 30)


def test_response_retrieved_whole_after_its_end_and_as_an_object(target: Target) -> None:
    client = target.client()
    created = client.responses.create(model="any", input="hi", background=True, extra_body=target.body(8))
    assert created.status == "queued" and created.id.startswith("resp_")
    _check_whole(_read(target.client("second").responses.retrieve(created.id, stream=True)), target.text(8), 8)
    again = target.client("second").responses.retrieve(created.id)
    assert (again.status, again.output_text, again.model) == ("completed", target.text(8), "any")


def test_responses_stream_helper_by_response_id(target: Target) -> None:
    client = target.client()
    created = client.responses.create(model="any", input="hi", background=True, extra_body=target.body(12, 10))
    with target.client("second").responses.stream(response_id=created.id) as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == target.text(12) and final.output_text == target.text(12)
    with target.client("second").responses.stream(response_id=created.id, starting_after=10) as stream:
        numbers = [event.sequence_number for event in stream]
    assert numbers == list(range(11, 4 + 12 + 4))


def test_response_not_in_the_background(target: Target) -> None:
    response = target.client().responses.create(model="any", input="hi", extra_body=target.body(5))
    assert (response.status, response.output_text) == ("completed", target.text(5))
    events = _read(target.client().responses.create(model="any", input="hi", stream=True,
                                                     extra_body=target.body(5)))
    _check_whole(events, target.text(5), 5)


def test_errors_come_in_openais_shape(target: Target) -> None:
    client = target.client()
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.retrieve("resp_neverMadeHere")
    assert missing.value.body == {"message": "no response 'resp_neverMadeHere' here (unknown, or forgotten)",
                                  "type": "not_found_error", "code": None}
    reply = httpx.post(target.first + "/chat/completions", json={"model": "any"})
    assert reply.status_code == 400
    assert reply.json() == {"error": {"message": 'the body needs "messages", a list, got \'null\'',
                                      "type": "invalid_request_error", "code": None}}
    reply = httpx.get(target.first + "/chat/completions")
    assert (reply.status_code, reply.headers["allow"]) == (405, "POST")
    assert json.loads(reply.content)["error"]["type"] == "invalid_request_error"


def test_models(target: Target) -> None:
    names = [model.id for model in target.client().models.list()]
    assert names == (["openai-test-model"] if target.kind == "model" else ["tokenwire-canned"])


def test_cancel_stops_the_response_wherever_it_runs(target: Target) -> None:
    created = target.client().responses.create(model="any", input="hi", background=True, stream=True,
                                               extra_body=target.body(200, 25))
    first = _read(created, 3)
    response_id = first[0].response.id
    cancelled = target.client("second").responses.cancel(response_id)
    assert cancelled.status == "cancelled"
    text = cancelled.output_text
    assert text.startswith("".join(event.delta for event in first if event.type == "response.output_text.delta"))
    assert text != target.text(200)
    replay = _read(target.client().responses.retrieve(response_id, stream=True))
    tokens = len(replay) - len(PREAMBLE) - len(ENDING) - 1
    assert [event.sequence_number for event in replay] == list(range(len(replay)))
    assert [event.type for event in replay] == [*PREAMBLE, *["response.output_text.delta"] * tokens, *ENDING,
                                                "response.incomplete"]
    assert replay[-1].response.status == "cancelled" and replay[-1].response.output_text == text
    again = target.client().responses.cancel(response_id)
    assert (again.status, again.output_text) == ("cancelled", text)


def test_cancel_after_the_end_leaves_it_completed(target: Target) -> None:
    created = target.client().responses.create(model="any", input="hi", extra_body=target.body(4))
    assert created.status == "completed"
    after = target.client("second").responses.cancel(created.id)
    assert (after.status, after.output_text) == ("completed", target.text(4))


def test_the_readmes_sdk_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's block on the OpenAI SDK, against tokenwire serve: it prints the answer, the rest after event
    10 (tokens 7 on), and the answer again."""
    code = code_block(section("OpenAI's wire: `/v1`"), "python")
    with serving() as live:
        exec(code.replace("http://127.0.0.1:8000/v1", live.url + "/v1"), {})     # noqa: S102 - the README's own code
    answer = "".join(ANSWER[:70])
    assert capsys.readouterr().out == answer + "".join(ANSWER[7:70]) + answer + "\n"


def test_heartbeats_between_chunks_are_nothing_to_the_sdk() -> None:
    """A silent stream's heartbeat comes between chunks and events; the SDK reads the same text and events."""
    with serving(heartbeat_s=0.005) as live:
        client = openai.OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0, timeout=30)
        body = {"tokens": 12, "producer_ms": 30}
        chunks = list(client.chat.completions.create(model="any", messages=MESSAGES, stream=True, extra_body=body))
        assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks) == "".join(ANSWER[:12])
        assert len(chunks) == 14
        events = _read(client.responses.create(model="any", input="hi", stream=True, extra_body=body))
        _check_whole(events, "".join(ANSWER[:12]), 12)
        raw = httpx.post(live.url + "/v1/chat/completions", json={"model": "any", "messages": MESSAGES,
                                                                  "stream": True, **body}, timeout=30)
    assert raw.content.count(b": ping\n") > 0 and raw.content.endswith(b"data: [DONE]\n\n")


def test_a_path_under_v1_that_is_no_route_is_openais_404(servers: dict[str, Target]) -> None:
    for target in (servers["serve"], servers["asgi"]):
        with pytest.raises(openai.NotFoundError) as missing:
            target.client().embeddings.create(model="any", input="x")
        assert missing.value.body["type"] == "not_found_error"
        assert missing.value.body["message"].startswith("no such path '/v1/embeddings': the routes here are ")
