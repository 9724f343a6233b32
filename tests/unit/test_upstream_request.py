"""What the proxy asks its upstream (``Upstream.body``): every field it does not own, in the chat completion's shape,
and a clear 400 (a ``ValueError`` naming the field) for what a chat completion cannot carry.  No I/O."""

from __future__ import annotations

from typing import Any

import pytest

from tokenwire.endpoints.decisions import ChatRequest, OpenAIRequest
from tokenwire.models import StreamRequest
from tokenwire.upstream import Upstream, UpstreamConfig

UPSTREAM = Upstream(UpstreamConfig("http://127.0.0.1:1/v1"))
ASK = [{"role": "user", "content": "hi"}]


def asked(api: str, **body: Any) -> StreamRequest:
    openai = OpenAIRequest(api, str(body.get("model", "m")), tuple(body.get("messages", ())), body.get("input"),
                           bool(body.get("stream")), False, body)
    return StreamRequest("s", {}, b"", "c", openai=openai)


def chatted(**body: Any) -> StreamRequest:
    messages = ({"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},)
    return StreamRequest("s", {}, b"", "c", chat=ChatRequest("c1", messages, "submit-message", None,
                                                            {"id": "c1", "messages": list(messages), **body}))


def test_a_chat_completion_goes_whole_but_what_the_proxy_owns() -> None:
    body = UPSTREAM.body(asked("chat.completions", model="m", messages=ASK, stream=False, n=1, cut_after=3,
                               top_k=5, logprobs=True, stream_options={"include_usage": False}))
    assert body == {"model": "m", "messages": ASK, "stream": True, "top_k": 5, "logprobs": True,
                    "stream_options": {"include_usage": True}}


def test_a_chats_body_fields_are_a_chat_completions() -> None:
    body = UPSTREAM.body(chatted(model="qwen", temperature=0.1, trigger="submit-message", messageId="a1"))
    assert body == {"model": "qwen", "temperature": 0.1, "stream": True, "stream_options": {"include_usage": True},
                    "messages": ASK}


def test_a_responses_fields_take_the_chat_completions_names() -> None:
    body = UPSTREAM.body(asked("responses", model="m", input="hi", store=False, background=True, truncation="auto",
                               text={"format": {"type": "json_object"}, "verbosity": "low"}, tool_choice="required",
                               parallel_tool_calls=True, include=["reasoning.encrypted_content"]))
    assert body == {"model": "m", "messages": ASK, "stream": True, "stream_options": {"include_usage": True},
                    "response_format": {"type": "json_object"}, "verbosity": "low", "tool_choice": "required",
                    "parallel_tool_calls": True}


def test_a_responses_files_go_as_file_parts() -> None:
    given = [{"type": "message", "role": "user", "content": [
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}]}]
    assert UPSTREAM.body(asked("responses", input=given))["messages"] == [{"role": "user", "content": [
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}}]}]


def test_the_assistants_text_and_its_calls_are_one_message() -> None:
    given = [{"role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
             {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
             {"type": "function_call", "call_id": "b", "name": "g", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "a", "output": [{"type": "input_text", "text": "1"}]}]
    assert UPSTREAM.body(asked("responses", input=given))["messages"] == [
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "1"}]


@pytest.mark.parametrize(("request_", "message"), [
    (asked("chat.completions", messages=ASK, n=2),
     "n must be 1: the proxy relays one answer per stream (several choices are neither spliced nor kept apart), "
     "got '2'"),
    (asked("chat.completions", messages=ASK, n=True),
     "n must be 1: the proxy relays one answer per stream (several choices are neither spliced nor kept apart), "
     "got 'true'"),
    (chatted(model="m", n=3),
     "n must be 1: the proxy relays one answer per stream (several choices are neither spliced nor kept apart), "
     "got '3'"),
    (chatted(model=5), "a chat body's model must be a non-empty string, got 5"),
    (chatted(), "this request names no model and the proxy has none of its own (--model)"),
    (chatted(model="m", stream_options=[1]), "stream_options must be an object, got '[1]'"),
    (asked("responses", input="hi", tools=[{"type": "web_search"}]),
     "tools[0] is a 'web_search' tool: the upstream's chat completions run function tools only"),
    (asked("responses", input="hi", tool_choice={"type": "file_search"}),
     "tool_choice must be \"auto\", \"none\", \"required\" or a function tool's {\"type\": \"function\", \"name\": "
     "...}, got '{\"type\": \"file_search\"}'"),
    (asked("responses", input=[{"type": "web_search_call", "id": "ws"}]),
     "input[0] has the type 'web_search_call'; the upstream's chat completions take messages, function_call "
     "and function_call_output items"),
    (asked("responses", input=[{"role": "user", "content": [{"type": "input_image", "file_id": "f1"}]}]),
     "input[0].content[0] is an image with no image_url (a file_id cannot be sent to the upstream), got "
     "'{\"type\": \"input_image\", \"file_id\": \"f1\"}'"),
    (asked("responses", input=[{"role": "user", "content": [{"type": "video"}]}]),
     "input[0].content[0] must be a part of type input_text, output_text, text, refusal, input_image, input_file, "
     "input_audio, got '{\"type\": \"video\"}'"),
    (asked("responses", input=[{"type": "function_call", "call_id": "a", "arguments": "{}"}]),
     "input[0].name must be a string, got 'null'"),
    (asked("responses", input=[{"type": "function_call_output", "call_id": "a", "output": "sunny"}],
           previous_response_id="resp_1"),
     "previous_response_id cannot be relayed: the proxy keeps no conversation to send the upstream, so send the "
     "earlier turns in input, got '\"resp_1\"'"),
    (asked("responses", input="hi", conversation={"id": "conv_1"}),
     "conversation cannot be relayed: the proxy keeps no conversation to send the upstream, so send the earlier "
     "turns in input, got '{\"id\": \"conv_1\"}'"),
])
def test_what_a_chat_completion_cannot_carry_is_named(request_: StreamRequest, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        UPSTREAM.body(request_)
    assert str(raised.value) == message
