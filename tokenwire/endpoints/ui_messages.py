"""A chat's UI messages (the AI SDK's ``useChat``) as a model reads a conversation: chat completion messages.

How this works: ``useChat`` sends the whole conversation as UI messages,
each a ``role`` and its ``parts``.  ``chat_messages`` turns them into the
messages of an OpenAI chat completion, as the SDK's own
``convertToModelMessages`` does for its providers:

- a system message is its text; a user message is its text, or, with
  files, a list of content parts (``text``; ``image_url`` for an image;
  ``file`` with ``file_data`` for another file);
- an assistant message is cut at each ``step-start``: each step is one
  assistant message with its text and its tool calls (the parts
  ``tool-<name>`` and ``dynamic-tool`` past ``input-streaming``, as
  ``tool_calls`` with the input as JSON ``arguments``), then one ``tool``
  message per call with a result (``output-available``: the output, a
  string as it is, else its JSON; ``output-error``: the error's text;
  ``output-denied``: that it was denied).  A chat whose last message is the
  assistant's with the client's tool outputs (``addToolOutput``,
  ``sendAutomaticallyWhen``) thus ends with the tool messages the model
  answers next.  Reasoning and data parts are not sent back (a chat
  completion takes neither).

A message or a part that is not one is a ``RequestError`` 400 naming where
it is (``messages[2].parts[1]``) and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .bodies import MAX_ID_CHARS
from .params import RequestError, echo

__all__ = ["chat_messages", "continued_message"]

# The tool part states whose call is complete (the SDK sends no call still streaming its input).
_CALLED = frozenset(("input-available", "approval-requested", "approval-responded", "output-available",
                     "output-error", "output-denied"))
# What a denied call's tool message says when the user gave no reason (the SDK's own words).
_DENIED = "Tool call execution denied."


def _refused(where: str, expected: str, value: object) -> RequestError:
    return RequestError(400, f"{where} must be {expected}, got {echo(json.dumps(value))}")


def _text_of(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise _refused(where, "a string", value)
    return value


def _parts(message: dict[str, Any], where: str) -> list[dict[str, Any]]:
    given = message.get("parts", [])
    if not isinstance(given, list):
        raise _refused(f"{where}.parts", "a list of parts", given)
    for index, part in enumerate(given):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise _refused(f"{where}.parts[{index}]", 'a part, an object with a "type", a string', part)
    return given


def _file(part: dict[str, Any], where: str) -> dict[str, Any]:
    url, media_type = _text_of(part.get("url"), f"{where}.url"), _text_of(part.get("mediaType"), f"{where}.mediaType")
    if media_type.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    filename = part.get("filename")
    return {"type": "file", "file": {"file_data": url, **({"filename": filename} if isinstance(filename, str) else {})}}


def _user(parts: list[dict[str, Any]], where: str) -> str | list[dict[str, Any]]:
    content = [{"type": "text", "text": _text_of(part.get("text"), f"{where}.parts[{index}].text")}
               if part["type"] == "text" else _file(part, f"{where}.parts[{index}]")
               for index, part in enumerate(parts) if part["type"] in ("text", "file")]
    if all(item["type"] == "text" for item in content):
        return "".join(item["text"] for item in content)
    return content


def _tool_name(part: dict[str, Any], where: str) -> str | None:
    """The tool a part calls (None: the part is no tool part)."""
    if part["type"] == "dynamic-tool":
        return _text_of(part.get("toolName"), f"{where}.toolName")
    return part["type"][5:] if part["type"].startswith("tool-") else None


def _tool_reply(part: dict[str, Any], call_id: str, where: str) -> dict[str, Any] | None:
    state = part.get("state")
    if state == "output-available":
        output = part.get("output")
        content = output if isinstance(output, str) else json.dumps(output)
    elif state == "output-error":
        content = _text_of(part.get("errorText"), f"{where}.errorText")
    elif state == "output-denied":
        approval = part.get("approval")
        reason = approval.get("reason") if isinstance(approval, dict) else None
        content = reason if isinstance(reason, str) else _DENIED
    else:
        return None
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _step(parts: list[tuple[int, dict[str, Any]]], where: str) -> list[dict[str, Any]]:
    """One step of an assistant message: its text and calls, then a tool message per call with a result."""
    text, calls, replies = [], [], []
    for index, part in parts:
        here = f"{where}.parts[{index}]"
        if part["type"] == "text":
            text.append(_text_of(part.get("text"), f"{here}.text"))
        name = _tool_name(part, here)
        if name is None or part.get("state") not in _CALLED:
            continue
        call_id = _text_of(part.get("toolCallId"), f"{here}.toolCallId")
        calls.append({"id": call_id, "type": "function",
                      "function": {"name": name, "arguments": json.dumps(part.get("input", {}))}})
        reply = _tool_reply(part, call_id, here)
        if reply is not None:
            replies.append(reply)
    if not text and not calls:
        return []
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text else None}
    return [message | ({"tool_calls": calls} if calls else {}), *replies]


def _assistant(parts: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    step: list[tuple[int, dict[str, Any]]] = []
    for index, part in enumerate(parts):
        if part["type"] == "step-start":
            messages += _step(step, where)
            step = []
        else:
            step.append((index, part))
    return messages + _step(step, where)


def _message(item: object, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise _refused(where, 'a message, an object with a "role"', item)
    role = item.get("role", "user")
    if role not in ("system", "user", "assistant"):
        raise _refused(f"{where}.role", '"system", "user" or "assistant"', role)
    return item


def chat_messages(messages: Sequence[object]) -> list[dict[str, Any]]:
    """The chat completion messages of a chat's UI ``messages`` (see the module); ``RequestError`` 400."""
    converted: list[dict[str, Any]] = []
    for index, item in enumerate(messages):
        where = f"messages[{index}]"
        message = _message(item, where)
        parts, role = _parts(message, where), message.get("role", "user")
        if role == "assistant":
            converted += _assistant(parts, where)
        elif role == "system":
            converted.append({"role": "system", "content": _user(parts, where)})
        else:
            converted.append({"role": "user", "content": _user(parts, where)})
    return converted


def continued_message(messages: Sequence[object]) -> str | None:
    """The id of the assistant message an answer goes on with: the last message's, when it is the assistant's
    (the client's tool outputs sent back), so ``useChat`` adds the answer to it; None otherwise."""
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "assistant" or last.get("id") is None:
        return None
    given = _text_of(last["id"], f"messages[{len(messages) - 1}].id")
    if not 0 < len(given) <= MAX_ID_CHARS:
        raise RequestError(400, f"messages[{len(messages) - 1}].id must be 1 to {MAX_ID_CHARS} characters, got "
                                f"{len(given)}")
    return given
