"""The real ``openai`` SDK reading typed parts through OpenAI's wire: reasoning, text, a tool call, usage.

``support.apps.openai_parts`` streams as vLLM does: reasoning, text, a call
of ``get_weather`` in pieces, its usage and no finish part.  It runs under
uvicorn on the memory log, and as two instances on one redis-server, where
a response made on the first is read on the second: directly, resumed after
every event number, and resumed in the middle of the call's arguments while
the model still generates.  (The renderings alone: ``unit/test_openai_chat.py``
and ``unit/test_openai_responses.py``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import openai
import pytest
from support.apps.openai_parts import ARGUMENTS, TEXT
from support.asgi import uvicorn
from support.instances import BLOCK_MS, LEASE_MS

APP = "support.apps.openai_parts:app"
# A strict tool: the SDK's helpers then parse a call's arguments too.
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
              "additionalProperties": False}
TOOLS: list[Any] = [{"type": "function", "function": {"name": "get_weather", "parameters": PARAMETERS,
                                                      "strict": True}}]
RESPONSE_TOOLS: list[Any] = [{"type": "function", "name": "get_weather", "parameters": PARAMETERS, "strict": True}]
MESSAGES: list[Any] = [{"role": "user", "content": "The weather in Paris?"}]
REASONING = "The user asks about the weather."
# The events of the whole response, in order (openai_responses' docstring says why each comes).
TYPES = ["response.created", "response.in_progress",
         "response.output_item.added", "response.content_part.added",
         *["response.reasoning_text.delta"] * 2, "response.reasoning_text.done", "response.content_part.done",
         "response.output_item.done",
         "response.output_item.added", "response.content_part.added", *["response.output_text.delta"] * len(TEXT),
         "response.output_text.done", "response.content_part.done", "response.output_item.done",
         "response.output_item.added", *["response.function_call_arguments.delta"] * len(ARGUMENTS),
         "response.function_call_arguments.done", "response.output_item.done", "response.completed"]
FIRST_ARGUMENT = TYPES.index("response.function_call_arguments.delta")


@pytest.fixture(scope="module", params=("memory", "redis"))
def urls(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """Where a response is made, and where it is read (the other instance on Redis)."""
    with ExitStack() as stack:
        if request.param == "memory":
            app = stack.enter_context(uvicorn(APP))
            yield app.url + "/v1", app.url + "/v1"
            return
        redis = request.getfixturevalue("redis_session")
        env = {"TOKENWIRE_LOG_URL": f"{redis.url}?lease_ms={LEASE_MS}&block_ms={BLOCK_MS}"}
        first, second = (stack.enter_context(uvicorn(APP, env=env)) for _ in "ab")
        yield first.url + "/v1", second.url + "/v1"


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=30)


def test_the_chat_stream_helper_accumulates_the_call_the_finish_and_the_usage(urls: tuple[str, str]) -> None:
    with client(urls[0]).chat.completions.stream(model="any", messages=MESSAGES, tools=TOOLS,
                                                 stream_options={"include_usage": True}) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.message.content == "".join(TEXT)
    assert [(call.id, call.function.name, call.function.arguments) for call in choice.message.tool_calls or []] == [
        ("call_1", "get_weather", "".join(ARGUMENTS))]
    assert choice.message.tool_calls[0].function.parsed_arguments == {"city": "Paris"}  # type: ignore[index]
    assert choice.finish_reason == "tool_calls"
    extra = choice.message.model_extra or {}
    assert extra["reasoning_content"] == REASONING == extra["reasoning"]
    assert final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens, final.usage.total_tokens) == (34, 12, 46)
    assert final.usage.completion_tokens_details is not None
    assert final.usage.completion_tokens_details.reasoning_tokens == 5
    argued = [event for event in events if event.type.startswith("tool_calls.function.arguments")]
    assert [getattr(event, "arguments_delta", None) for event in argued] == ["", *ARGUMENTS, None]  # the start's ""
    assert argued[-1].type == "tool_calls.function.arguments.done"


def test_a_whole_chat_completion_carries_the_call(urls: tuple[str, str]) -> None:
    completion = client(urls[0]).chat.completions.create(model="any", messages=MESSAGES, tools=TOOLS)
    choice = completion.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("".join(TEXT), "tool_calls")
    assert [(call.id, call.function.arguments) for call in choice.message.tool_calls or []] == [
        ("call_1", "".join(ARGUMENTS))]
    assert completion.usage is not None and completion.usage.total_tokens == 46


def _check_final(response: Any) -> None:
    assert response.status == "completed" and response.output_text == "".join(TEXT)
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output[0].content[0].text == REASONING
    call = response.output[2]
    assert (call.call_id, call.name, call.arguments, call.status) == ("call_1", "get_weather", "".join(ARGUMENTS),
                                                                      "completed")
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (34, 12, 46)


def test_a_streamed_response_read_by_the_sdks_helper(urls: tuple[str, str]) -> None:
    with client(urls[0]).responses.stream(model="any", input="The weather in Paris?", tools=RESPONSE_TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [event.type for event in events] == TYPES
    assert [event.sequence_number for event in events] == list(range(len(TYPES)))
    assert [event.delta for event in events if event.type == "response.function_call_arguments.delta"] == ARGUMENTS
    _check_final(final)


def _read_until(stream: Any, kind: str) -> list[Any]:
    """The events of ``stream`` up to the first of type ``kind``; then the connection is dropped."""
    events = []
    for event in stream:
        events.append(event)
        if event.type == kind:
            break
    stream.close()
    return events


def test_a_background_response_resumed_in_the_arguments_on_the_other_instance(urls: tuple[str, str]) -> None:
    """Dropped at the first argument delta while the model still generates (20 ms a part), then read on the
    other instance after it: the rest, numbered on, whole; then the object, with every output item."""
    made = client(urls[0]).responses.create(model="any", input="hi", background=True, stream=True,
                                            extra_body={"delay_ms": 20})
    first = _read_until(made, "response.function_call_arguments.delta")
    assert first[-1].sequence_number == FIRST_ARGUMENT and first[-1].delta == ARGUMENTS[0]
    response_id = first[0].response.id
    rest = list(client(urls[1]).responses.retrieve(response_id, stream=True, starting_after=FIRST_ARGUMENT))
    assert [event.sequence_number for event in rest] == list(range(FIRST_ARGUMENT + 1, len(TYPES)))
    assert [event.type for event in first + rest] == TYPES
    assert [event.delta for event in rest if event.type == "response.function_call_arguments.delta"] == ARGUMENTS[1:]
    assert rest[-1 - 2].arguments == "".join(ARGUMENTS)
    _check_final(rest[-1].response)
    _check_final(client(urls[1]).responses.retrieve(response_id))


def test_every_event_number_resumes_to_exactly_the_rest(urls: tuple[str, str]) -> None:
    created = client(urls[0]).responses.create(model="any", input="hi", background=True)
    reader = client(urls[1])
    whole = [event.model_dump() for event in reader.responses.retrieve(created.id, stream=True)]
    assert [event["type"] for event in whole] == TYPES
    for after in range(len(whole)):
        rest = reader.responses.retrieve(created.id, stream=True, starting_after=after)
        assert [event.model_dump() for event in rest] == whole[after + 1:], after
    with pytest.raises(openai.BadRequestError) as past:
        list(reader.responses.retrieve(created.id, stream=True, starting_after=len(whole)))
    assert past.value.body["message"] == (f"starting_after {len(whole)} is past the end: this response has events "
                                          f"0..{len(whole) - 1} so far")
