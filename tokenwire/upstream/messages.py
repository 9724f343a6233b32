"""What a tokenwire request asks an upstream: its chat messages, whatever wire it came in on.

How this works: an OpenAI chat completion's ``messages`` go as sent; a
response's ``input`` (a string, or a list of items whose content is a string
or parts with ``text``) becomes messages, after its ``instructions`` as a
system message; an AI SDK chat's UI messages (``parts`` of type ``text``)
become messages of their text; ``POST /streams`` and ``GET /stream`` send the
``prompt`` parameter as the user's message.  The sampling fields an OpenAI
body carries go along (a response's ``max_output_tokens`` as ``max_tokens``).
A continuation adds the logged prefix as the assistant's partial turn
(``continued``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..asgi.model_stream import StreamRequest

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


def _input_messages(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    given = request.get("input")
    messages: list[dict[str, Any]] = []
    if isinstance(request.get("instructions"), str):
        messages.append({"role": "system", "content": request["instructions"]})
    if isinstance(given, str):
        return [*messages, {"role": "user", "content": given}]
    for item in given or []:
        if isinstance(item, dict) and "role" in item:
            messages.append({"role": item["role"], "content": _text(item.get("content"))})
    return messages


def messages_of(request: StreamRequest) -> list[dict[str, Any]]:
    """The chat messages ``request`` asks the upstream to answer."""
    if request.openai is not None:
        if request.openai.messages:
            return [dict(message) for message in request.openai.messages]
        return _input_messages(request.openai.body)
    if request.chat is not None:
        return [{"role": message.get("role", "user"), "content": _text(message.get("parts"))}
                for message in request.chat.messages if isinstance(message, dict)]
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
