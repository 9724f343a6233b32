"""A response's ``input`` items as a chat completion's messages: text, images, files, tool calls and their outputs.

How this works: the Responses API sends a conversation as items; the
upstream takes chat messages.  A message item (``{"role", "content"}``, with
or without ``"type": "message"``) is a message of that role whose content is
its text (a string, or text parts joined) or, with an image, a file or
audio, a list of the chat completion's content parts (``input_image`` as
``image_url``, ``input_file`` as ``file``, ``input_audio`` as
``input_audio``).  A ``function_call`` item is a call in the assistant's
``tool_calls`` (the calls in a row share one assistant message, the
assistant's text before them too), and a ``function_call_output`` item the
``tool`` message with its ``call_id``.  A ``reasoning`` item (a previous
answer's reasoning, sent back) has no chat completion message and is left
out.  Anything else is a ``ValueError`` (a 400) naming the item by its index
(``input[2]``) and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..endpoints.params import echo

__all__ = ["input_messages"]

Message = dict[str, Any]
# The item types that are left out: a chat completion has no message for them.
_LEFT_OUT = frozenset(("reasoning",))


def _shown(value: Any) -> str:
    return echo(json.dumps(value))


def _string(item: Mapping[str, Any], name: str, where: str) -> str:
    value = item.get(name)
    if not isinstance(value, str):
        raise ValueError(f"{where}.{name} must be a string, got {_shown(value)}")
    return value


def _image(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    url = part.get("image_url")
    if not isinstance(url, str):
        raise ValueError(f"{where} is an image with no image_url (a file_id cannot be sent to the upstream), got "
                         f"{_shown(part)}")
    detail = part.get("detail")
    return {"type": "image_url", "image_url": {"url": url, **({"detail": detail} if detail else {})}}


def _file(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    file = {name: part[name] for name in ("file_data", "file_id", "filename") if part.get(name) is not None}
    if "file_data" not in file and "file_id" not in file:
        raise ValueError(f"{where} is a file with neither file_data nor file_id, got {_shown(part)}")
    return {"type": "file", "file": file}


def _audio(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    audio = part.get("input_audio")
    if not isinstance(audio, Mapping):
        raise ValueError(f"{where}.input_audio must be an object with data and format, got {_shown(audio)}")
    return {"type": "input_audio", "input_audio": dict(audio)}


def _text_part(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    return {"type": "text", "text": _string(part, "refusal" if part["type"] == "refusal" else "text", where)}


_PARTS: dict[str, Callable[[Mapping[str, Any], str], dict[str, Any]]] = {
    "input_text": _text_part, "output_text": _text_part, "text": _text_part, "refusal": _text_part,
    "input_image": _image, "input_file": _file, "input_audio": _audio}


def content_of(content: Any, where: str) -> Any:
    """An item's content as a chat message's: a string as it is, parts as text, or as content parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise ValueError(f"{where} must be a string or a list of parts, got {_shown(content)}")
    parts = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if not isinstance(part, Mapping) or kind not in _PARTS:
            raise ValueError(f"{where}[{index}] must be a part of type {', '.join(_PARTS)}, got {_shown(part)}")
        parts.append(_PARTS[kind](part, f"{where}[{index}]"))
    if all(part["type"] == "text" for part in parts):
        return "".join(part["text"] for part in parts)
    return parts


def _call(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    name, arguments = _string(item, "name", where), _string(item, "arguments", where)
    return {"id": _string(item, "call_id", where), "type": "function",
            "function": {"name": name, "arguments": arguments}}


def _output(item: Mapping[str, Any], where: str) -> Message:
    output = item.get("output")
    content = output if isinstance(output, str) else content_of(output, f"{where}.output")
    return {"role": "tool", "tool_call_id": _string(item, "call_id", where), "content": content}


def _add_call(messages: list[Message], call: dict[str, Any]) -> None:
    """Put ``call`` in the last message if it is the assistant's and no tool has answered since, else a new one."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
        if not last.get("content"):
            last["content"] = None
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def input_messages(items: list[Any], message: Callable[[Any, str], Message]) -> list[Message]:
    """The chat messages of a response's ``input`` items (see the module); ``message`` reads (and checks) a
    message item, given with its place (``input[2]``)."""
    messages: list[Message] = []
    for index, item in enumerate(items):
        where = f"input[{index}]"
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind in _LEFT_OUT:
            continue
        if kind == "function_call":
            _add_call(messages, _call(item, where))
        elif kind == "function_call_output":
            messages.append(_output(item, where))
        elif kind in (None, "message"):
            read = message(item, where)
            messages.append({"role": read["role"], "content": content_of(read.get("content"), f"{where}.content")})
        else:
            shown = echo(kind) if isinstance(kind, str) else _shown(kind)
            raise ValueError(f"{where} has the type {shown}; the upstream's chat completions take messages, "
                             f"function_call and function_call_output items")
    return messages
