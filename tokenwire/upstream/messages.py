"""What a tokenwire request asks an upstream: its chat messages, whatever wire it came in on.

How this works: an OpenAI chat completion's ``messages`` go as sent; a
response's ``input`` (a string, or a list of items whose content is a string
or parts with ``text``) becomes messages, after its ``instructions`` as a
system message; an AI SDK chat's UI messages become messages of their
text, their files and their tool calls and results
(``endpoints.ui_messages``); ``POST /streams`` and ``GET /stream`` send the
``prompt`` parameter as the user's message.  The sampling fields an OpenAI
body carries go along (a response's ``max_output_tokens`` as ``max_tokens``).
A continuation adds the logged prefix as the assistant's partial turn
(``continued``).  Each item of ``messages`` or ``input`` is checked before
anything is sent: one that is not a message (an object with a string
``role``) is a ``ValueError`` naming its index and what was expected, which
the stream maker answers as a 400.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..asgi.model_stream import StreamRequest
from ..endpoints.params import RequestError, echo
from ..endpoints.ui_messages import chat_messages

__all__ = ["SAMPLING", "continued", "messages_of", "sampling_of"]

# The body fields of a chat completion passed on to the upstream as they are.
SAMPLING = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed", "presence_penalty",
            "frequency_penalty", "n", "logit_bias", "user")


def _text(content: Any) -> str:
    """A message's content as text: a string as is, a list of parts their ``text`` joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _shown(value: Any) -> str:
    return echo(json.dumps(value))


def _message(item: Any, where: str, role_needed: bool = True) -> dict[str, Any]:
    """``item``, the message at ``where`` (``messages[2]``), as a new dict; raises ``ValueError`` (a 400) naming
    ``where`` for one that is not an object with a string ``role`` (``role_needed``: absent is allowed if not)."""
    if not isinstance(item, dict):
        raise ValueError(f"{where} must be a message, an object with a \"role\", got {_shown(item)}")
    role = item.get("role")
    if not isinstance(role, str) and (role_needed or role is not None):
        raise ValueError(f"{where} must be a message with a \"role\", a string, got {_shown(role)}")
    return dict(item)


def _input_messages(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    given = request.get("input")
    messages: list[dict[str, Any]] = []
    if isinstance(request.get("instructions"), str):
        messages.append({"role": "system", "content": request["instructions"]})
    if isinstance(given, str):
        return [*messages, {"role": "user", "content": given}]
    for index, item in enumerate(given or []):
        where = f"input[{index}]"
        content = _message(item, where).get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise ValueError(f"{where}.content must be a string or a list of parts, got {_shown(content)}")
        messages.append({"role": item["role"], "content": _text(content)})
    return messages


def messages_of(request: StreamRequest) -> list[dict[str, Any]]:
    """The chat messages ``request`` asks the upstream to answer; raises ``ValueError`` for an item that is none."""
    if request.openai is not None:
        if request.openai.messages:
            return [_message(item, f"messages[{index}]") for index, item in enumerate(request.openai.messages)]
        return _input_messages(request.openai.body)
    if request.chat is not None:                # tool parts as tool_calls and tool messages (ui_messages)
        try:
            return chat_messages(request.chat.messages)
        except RequestError as exc:
            raise ValueError(exc.message) from None
    return [{"role": "user", "content": request.params.get("prompt", "")}]


def sampling_of(request: StreamRequest) -> dict[str, Any]:
    """The sampling fields of an OpenAI body, as the upstream's chat completion takes them."""
    if request.openai is None:
        return {}
    body = request.openai.body
    taken = {name: body[name] for name in SAMPLING if name in body}
    if "max_output_tokens" in body:
        taken["max_tokens"] = body["max_output_tokens"]
    return taken


def continued(messages: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """``messages`` with ``prefix`` as the assistant's partial turn (a continuation)."""
    return [*messages, {"role": "assistant", "content": prefix}]
