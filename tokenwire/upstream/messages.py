"""What a tokenwire request asks an upstream: its chat messages, whatever wire it came in on.

How this works: an OpenAI chat completion's ``messages`` go as sent (their
images and tool results too); a response's ``input`` (a string, or a list
of items) becomes messages, after its ``instructions`` as a system message:
its messages with their text, images and files, its ``function_call`` and
``function_call_output`` items as the assistant's ``tool_calls`` and
``tool`` messages (``items``); an AI SDK chat's UI messages become messages
of their text, their files and their tool calls and results
(``endpoints.ui_messages``); ``POST /streams`` and ``GET /stream`` send the
``prompt`` parameter as the user's message.  The other fields of the
request go along as ``fields`` says.  A continuation adds the logged
prefix's text as the assistant's partial turn (``continued``).  Each item of ``messages`` or ``input`` is checked before
anything is sent: one that is not a message (an object with a string
``role``) is a ``ValueError`` naming its index and what was expected, which
the stream maker answers as a 400.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..endpoints.params import RequestError, echo
from ..endpoints.ui_messages import chat_messages
from ..models import StreamRequest
from .items import input_messages

__all__ = ["continued", "messages_of"]


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
    return [*messages, *input_messages(given or [], _message)]


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


def continued(messages: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """``messages`` with ``prefix`` as the assistant's partial turn (a continuation)."""
    return [*messages, {"role": "assistant", "content": prefix}]
