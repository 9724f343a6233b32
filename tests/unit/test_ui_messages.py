"""A chat's UI messages as the model reads them (``tokenwire.endpoints.ui_messages``): text, files, and the
tool parts of ``useChat`` with tools as the assistant's tool calls and the tools' messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tokenwire.asgi.model_stream import StreamRequest
from tokenwire.endpoints.chat import parse_chat
from tokenwire.endpoints.params import RequestError
from tokenwire.endpoints.ui_messages import chat_messages, continued_message
from tokenwire.upstream.messages import messages_of

# A conversation as useChat sends it after a tool ran on the client (addToolOutput, sendAutomaticallyWhen):
# the assistant's message ends with the call's output, and the answer goes on with it.
CHAT: list[dict[str, Any]] = [
    {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
    {"id": "u1", "role": "user", "parts": [
        {"type": "text", "text": "Weather in "}, {"type": "text", "text": "Paris?"},
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,"}]},
    {"id": "a1", "role": "assistant", "parts": [
        {"type": "step-start"}, {"type": "reasoning", "text": "A tool, then."},
        {"type": "text", "text": "Checking."},
        {"type": "tool-get_weather", "toolCallId": "call_1", "state": "output-available",
         "input": {"city": "Paris"}, "output": {"celsius": 21}},
        {"type": "dynamic-tool", "toolName": "lookup", "toolCallId": "call_2", "state": "output-error",
         "input": {"q": "x"}, "errorText": "timed out"},
        {"type": "tool-draft", "toolCallId": "call_3", "state": "input-streaming", "input": {"a": 1}},
        {"type": "step-start"}, {"type": "text", "text": "Also:"},
        {"type": "tool-ask", "toolCallId": "call_4", "state": "output-available", "input": {}, "output": "yes"},
        {"type": "data-weather", "data": {"city": "Paris"}}]},
]


def test_tool_parts_reach_the_model_as_tool_calls_and_tool_messages_step_by_step() -> None:
    assert chat_messages(CHAT) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in "}, {"type": "text", "text": "Paris?"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,"}}]},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"celsius": 21}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "timed out"},
        {"role": "assistant", "content": "Also:", "tool_calls": [
            {"id": "call_4", "type": "function", "function": {"name": "ask", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_4", "content": "yes"}]


def test_the_proxy_sends_the_upstream_the_same_tool_calls_and_tool_messages() -> None:
    chat = parse_chat(json.dumps({"messages": CHAT}).encode())
    assert messages_of(StreamRequest("s", {}, b"", "c", chat=chat)) == chat_messages(CHAT)


def test_a_text_only_chat_is_its_text_and_a_message_without_role_is_the_users() -> None:
    assert chat_messages([{"parts": [{"type": "text", "text": "hi"}]}, {"role": "assistant", "parts": [
        {"type": "text", "text": "hello"}]}, {"role": "user"}]) == [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "user", "content": ""}]


def test_a_chat_ending_with_the_assistants_tool_outputs_goes_on_with_that_message() -> None:
    assert continued_message(CHAT) == "a1"
    assert continued_message(CHAT[:2]) is None and continued_message([]) is None
    chat = parse_chat(json.dumps({"id": "c", "messages": CHAT, "trigger": "submit-message"}).encode())
    assert chat.continues == "a1" and chat.chat_messages == tuple(chat_messages(CHAT))


@pytest.mark.parametrize(("messages", "error"), [
    ([7], "messages[0] must be a message, an object with a \"role\", got '7'"),
    ([{"role": "tool"}], "messages[0].role must be \"system\", \"user\" or \"assistant\", got '\"tool\"'"),
    ([{"role": "user", "parts": "hi"}], "messages[0].parts must be a list of parts, got '\"hi\"'"),
    ([{"role": "user", "parts": [{"text": "hi"}]}],
     "messages[0].parts[0] must be a part, an object with a \"type\", a string, got '{\"text\": \"hi\"}'"),
    ([{"role": "user", "parts": [{"type": "text", "text": 3}]}], "messages[0].parts[0].text must be a string, got '3'"),
    ([{"role": "assistant", "parts": [{"type": "tool-x", "state": "output-available", "toolCallId": 5}]}],
     "messages[0].parts[0].toolCallId must be a string, got '5'"),
    ([{"role": "assistant", "parts": [{"type": "dynamic-tool", "state": "input-available", "toolCallId": "c"}]}],
     "messages[0].parts[0].toolName must be a string, got 'null'"),
    ([{"role": "user", "parts": [{"type": "file", "url": "u"}]}], "messages[0].parts[0].mediaType must be a string, "
                                                                 "got 'null'"),
    ([{"role": "assistant", "id": "x" * 257}], "messages[0].id must be 1 to 256 characters, got 257"),
])
def test_a_message_or_part_that_is_none_is_a_400_naming_where_it_is(messages: list[Any], error: str) -> None:
    with pytest.raises(RequestError) as raised:
        parse_chat(json.dumps({"messages": messages}).encode())
    assert (raised.value.status, str(raised.value)) == (400, error)
