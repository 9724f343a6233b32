"""``tokenwire proxy``, the command as typed, in front of a stand-in that streams as vLLM does
(``support.apps.upstream_standin``, ``style=vllm``): the openai SDK's accumulated answer through the proxy is the one
it reads from the stand-in directly, reasoning, tool call, finish reason and usage included, and ``n: 2`` is a 400
naming n."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion
from support.apps import upstream_standin
from support.asgi_thread import in_thread
from support.tokenwire_process import Tokenwire, running_tokenwire

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def standin() -> Iterator[str]:
    with in_thread(upstream_standin.app) as base:
        yield base + "/v1"


@pytest.fixture(scope="module")
def proxy(standin: str) -> Iterator[Tokenwire]:
    with running_tokenwire(["proxy", "--upstream", standin, "--port", "0", "--quiet"]) as process:
        yield process


def client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=30)


def accumulated(base: str) -> ChatCompletion:
    state = ChatCompletionStreamState()
    for chunk in client(base).chat.completions.create(model="style=vllm", messages=ASK, tools=TOOLS,
                                                      stream=True, stream_options={"include_usage": True}):
        state.handle_chunk(chunk)
    return state.get_final_completion()


def test_the_sdk_reads_through_the_command_what_it_reads_directly(standin: str, proxy: Tokenwire) -> None:
    direct, proxied = accumulated(standin), accumulated(proxy.url + "/v1")
    choice, through = direct.choices[0], proxied.choices[0]
    assert through.message.tool_calls is not None and choice.message.tool_calls is not None
    assert [(call.id, call.function.name, call.function.arguments)
            for call in through.message.tool_calls] == [("chatcmpl-tool-7b3e", "get_weather", '{"city": "Paris"}')]
    assert through.message.tool_calls[0].function == choice.message.tool_calls[0].function
    assert (through.message.content, through.finish_reason) == (choice.message.content, "tool_calls")
    assert (through.message.model_extra or {})["reasoning"] == (choice.message.model_extra or {})["reasoning"] \
        == "The user asks for the weather; I should call get_weather."
    assert proxied.usage is not None and direct.usage is not None
    assert (proxied.usage.prompt_tokens, proxied.usage.completion_tokens, proxied.usage.total_tokens) \
        == (direct.usage.prompt_tokens, direct.usage.completion_tokens, direct.usage.total_tokens) == (20, 14, 34)


def test_n_two_is_refused_by_name(proxy: Tokenwire) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client(proxy.url + "/v1").chat.completions.create(model="style=vllm", messages=ASK, n=2)
    assert refused.value.body == {"message": "n must be 1: the proxy relays one answer per stream (several choices "
                                             "are neither spliced nor kept apart), got '2'",
                                  "type": "invalid_request_error", "code": None}
