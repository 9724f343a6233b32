"""The request fields the proxy passes on to the upstream's chat completion: every one it does not own.

How this works: the proxy owns a few fields of what it sends: ``model``
(``--model``, else the request's), ``messages`` (``messages``), ``stream``
(always true), ``stream_options.include_usage`` (always true, so the answer's
usage is relayed; the client's own ``stream_options`` go along) and ``n``
(one answer per stream: ``n`` other than 1 is a ``ValueError``, a 400 naming
it, never two answers spliced into one).  Every other field goes on as sent:

- a chat completion's (``POST /v1/chat/completions``): all of them
  (``tools``, ``tool_choice``, ``parallel_tool_calls``, ``response_format``,
  ``reasoning_effort``, sampling, the server's own such as vLLM's
  ``top_k``), but tokenwire's ``cut_after``;
- a chat's (``POST /chat``): the fields the AI SDK's ``body`` option adds
  (``model``, ``tools``, ...) are a chat completion's; the transport's own
  (``id``, ``messages``, ``trigger``, ``messageId``) and ``cut_after`` are not;
- a response's (``POST /v1/responses``) are in another shape: the ones a chat
  completion has under the same name go as they are, ``max_output_tokens`` is
  ``max_tokens``, ``reasoning.effort`` ``reasoning_effort``, ``text.format``
  ``response_format`` and ``text.verbosity`` ``verbosity``; a function tool
  and a ``tool_choice`` naming one take the chat completion's shape.  A tool
  the upstream cannot run (a built-in one, such as ``web_search``) is a 400
  naming it; the fields about the response itself (``input``,
  ``instructions``, ``store``, ``background``, ``include``,
  ``truncation``...) are tokenwire's or have no chat completion field, and
  are not sent.  A response that continues a conversation the server keeps
  (``previous_response_id``, ``conversation``) is a 400 naming the field:
  the proxy keeps no conversation to send, and an upstream asked without it
  would answer a conversation cut short.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..endpoints.openai import one_choice
from ..endpoints.params import echo
from ..models import StreamRequest

__all__ = ["OWNED", "RESPONSE_FIELDS", "fields_of"]

# The fields the proxy sets itself, or tokenwire reads (cut_after), on every route.
OWNED = frozenset(("model", "messages", "stream", "stream_options", "n", "cut_after"))
# What the AI SDK's transports send about the chat itself (endpoints.chat.CHAT_FIELDS).
_CHAT_OWN = frozenset(("id", "messages", "trigger", "messageId"))
# A response's fields that a chat completion has under the same name and meaning.
RESPONSE_FIELDS = ("temperature", "top_p", "parallel_tool_calls", "user", "safety_identifier", "prompt_cache_key",
                   "service_tier")


def _shown(value: Any) -> str:
    return echo(json.dumps(value))


def _kind(kind: Any) -> str:
    """A ``type`` as an error names it: a string quoted once, anything else as its JSON."""
    return echo(kind) if isinstance(kind, str) else _shown(kind)


def _checked_n(body: Mapping[str, Any]) -> None:
    if not one_choice(body):
        raise ValueError(f"n must be 1: the proxy relays one answer per stream (several choices are neither "
                         f"spliced nor kept apart), got {_shown(body['n'])}")


def fields_of(request: StreamRequest) -> dict[str, Any]:
    """The fields of ``request`` the upstream's chat completion is sent (see the module), ``stream_options``
    with ``include_usage`` among them; raises ``ValueError`` (a 400) naming a field that cannot be sent."""
    if request.openai is not None and request.openai.api == "responses":
        taken = _response_fields(request.openai.body)
        options: Any = {}
    else:
        body = request.openai.body if request.openai is not None else \
            request.chat.body if request.chat is not None else {}
        _checked_n(body)
        owned = OWNED if request.chat is None else OWNED | _CHAT_OWN
        taken = {name: value for name, value in body.items() if name not in owned}
        options = body.get("stream_options") or {}
    if not isinstance(options, Mapping):
        raise ValueError(f"stream_options must be an object, got {_shown(options)}")
    taken["stream_options"] = {**options, "include_usage": True}
    return taken


# A response's fields that name a conversation kept on the server: the upstream would be asked without it.
KEPT_CONVERSATION = ("previous_response_id", "conversation")


def _response_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    for name in KEPT_CONVERSATION:
        if body.get(name) is not None:
            raise ValueError(f"{name} cannot be relayed: the proxy keeps no conversation to send the upstream, so "
                             f"send the earlier turns in input, got {_shown(body[name])}")
    taken = {name: body[name] for name in RESPONSE_FIELDS if name in body}
    if "max_output_tokens" in body:
        taken["max_tokens"] = body["max_output_tokens"]
    reasoning, text = body.get("reasoning"), body.get("text")
    if isinstance(reasoning, Mapping) and reasoning.get("effort") is not None:
        taken["reasoning_effort"] = reasoning["effort"]
    if isinstance(text, Mapping):
        if text.get("format") is not None:
            taken["response_format"] = _format(text["format"])
        if text.get("verbosity") is not None:
            taken["verbosity"] = text["verbosity"]
    if body.get("tools") is not None:
        taken["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        taken["tool_choice"] = _tool_choice(body["tool_choice"])
    return taken


def _format(given: Any) -> Any:
    """A response's ``text.format`` as a chat completion's ``response_format`` (a JSON schema's is nested)."""
    if not isinstance(given, Mapping) or given.get("type") != "json_schema":
        return given
    schema = {name: value for name, value in given.items() if name != "type"}
    return {"type": "json_schema", "json_schema": schema}


def _tools(given: Any) -> list[dict[str, Any]]:
    if not isinstance(given, list):
        raise ValueError(f"tools must be a list, got {_shown(given)}")
    tools = []
    for index, tool in enumerate(given):
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, Mapping) else tool
            raise ValueError(f"tools[{index}] is a {_kind(kind)} tool: the upstream's chat completions run "
                             f"function tools only")
        function = {name: value for name, value in tool.items() if name != "type"}
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(given: Any) -> Any:
    if isinstance(given, str):
        return given                          # "auto", "none", "required"
    if isinstance(given, Mapping) and given.get("type") == "function" and isinstance(given.get("name"), str):
        return {"type": "function", "function": {"name": given["name"]}}
    raise ValueError(f"tool_choice must be \"auto\", \"none\", \"required\" or a function tool's "
                     f"{{\"type\": \"function\", \"name\": ...}}, got {_shown(given)}")
