"""OpenAI's ``response`` object: its status, its usage and its fields, for the Responses events and the routes.

How this works: ``response_object`` lays out every field the openai SDK's
``Response`` model reads, with what tokenwire knows (the id, model, status,
output items, usage) and OpenAI's defaults for the rest; ``response_status``
says which status an ending means, and ``usage_of`` reads a ``Usage`` part's
figures (or counts the entries when the model gave none).
"""

from __future__ import annotations

from typing import Any

from ..core.endings import STOPPED_REASON, EarlyEnd
from ..core.parts import Usage
from .openai_wire import Answered

__all__ = ["response_object", "response_status", "usage_of"]


def response_status(ending: EarlyEnd | None, ended: bool) -> str:
    """A response's ``status``: in_progress, completed, failed, cancelled (stopped) or incomplete."""
    if not ended:
        return "in_progress"
    if ending is None:
        return "completed"
    if ending.error is not None:
        return "failed"
    return "cancelled" if ending.reason == STOPPED_REASON else "incomplete"


def usage_of(total: int, part: Usage | None) -> dict[str, Any]:
    """A response's ``usage``: the ``Usage`` part's figures, or ``total`` entries as output tokens."""
    figures = Usage(output_tokens=total) if part is None else part
    return {"input_tokens": figures.input_tokens,
            "input_tokens_details": {"cached_tokens": figures.cached_input_tokens, "cache_write_tokens": 0},
            "output_tokens": figures.output_tokens,
            "output_tokens_details": {"reasoning_tokens": figures.reasoning_tokens},
            "total_tokens": figures.total_tokens}


def response_object(answered: Answered, status: str, *, background: bool, output: list[dict[str, Any]] | None = None,
                    usage: dict[str, Any] | None = None, error: str | None = None,
                    incomplete: str | None = None) -> dict[str, Any]:
    """The ``response`` object: its ``status``, its output items (none yet by default) and ``usage``."""
    return {"id": answered.id, "object": "response", "created_at": answered.created, "status": status,
            "background": background, "error": None if error is None else {"code": "server_error",
                                                                            "message": error},
            "incomplete_details": None if incomplete is None else {"reason": incomplete}, "instructions": None,
            "max_output_tokens": None, "metadata": {}, "model": answered.model, "output": output or [],
            "parallel_tool_calls": True, "previous_response_id": None, "reasoning": None, "store": True,
            "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
            "top_p": 1.0, "truncation": "disabled", "usage": usage}
