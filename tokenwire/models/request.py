"""What a model factory is called with (``StreamRequest``) and what it returns (``ModelFactory``).

A factory is called once per new stream, and once more for a continuation:
then ``prefix`` holds the parts the dead owner logged, text as ``str`` and
every other part as its ``tokenwire.core.parts`` object, and ``prefix_text``
their text, to send back as the assistant's partial turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..core.parts import Part
from ..core.tokenlog import DEFAULT_MAX_TOKENS
from ..endpoints.access import shown
from ..endpoints.decisions import ChatRequest, OpenAIRequest

__all__ = ["MAX_MODEL_TOKENS", "ModelFactory", "ModelFailure", "StreamRequest", "Tokens"]

# The most parts one model stream may yield: what a stream's token log keeps
# (DEFAULT_MAX_TOKENS), far past any LLM answer; a model that goes on past
# it ends with `failed` rather than losing the start of its answer.
MAX_MODEL_TOKENS = DEFAULT_MAX_TOKENS


class ModelFailure(Exception):
    """A model's failure that its message says whole (an upstream that refused, stalled, broke off): the server logs
    it as one line, its type and its message, without a traceback of the code it passed through.  Its message is
    the operator's: a reader's ``failed`` event names its type only, as for any exception."""


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """What the model factory is called with for a new stream.

    stream_id: the new stream's id; params: the query's parameters (without
    ``cut_after`` and ``last_event_id``, which the app reads itself); body:
    the ``POST /streams`` body (empty for ``GET /stream``); client: the
    client's address.  prefix and start: empty and 0 for a new stream; for a
    continuation (``TokenStreams(takeover="continue")``: the process that
    generated the stream died), the parts logged so far (text as ``str``,
    the others as ``tokenwire.core.parts`` objects) and the index the new
    iterator's first part gets (``start == len(prefix)``): continue the
    answer after ``prefix_text``, for instance by sending it back as the
    assistant's partial turn.  chat: for ``POST /chat``, its body read (the
    chat id, the messages, the trigger, the whole JSON object; ``params`` is
    then empty and ``body`` the raw JSON); None for the other routes.
    headers: the creating request's headers, lower-case names (a name sent
    twice: its values joined by ``", "``); on a continuation, those the log
    kept (all but ``keep_out_of_log``'s).  principal: who made the stream,
    as the app's ``authorize`` hook named them (None: the app has no hook).
    openai: for ``POST /v1/chat/completions`` and ``POST /v1/responses``,
    the body read (``api``, ``model``, the ``messages`` or the ``input``,
    the whole JSON object; ``params`` is then empty); None for the others.
    """

    stream_id: str
    params: Mapping[str, str]
    body: bytes
    client: str
    prefix: tuple[str | Part, ...] = ()
    start: int = 0
    chat: ChatRequest | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    principal: str | None = None
    openai: OpenAIRequest | None = None

    def __repr__(self) -> str:          # a model that logs its request logs no credentials
        values = {one.name: getattr(self, one.name) for one in fields(self)}
        values["headers"] = shown(self.headers)
        return f"StreamRequest({', '.join(f'{name}={value!r}' for name, value in values.items())})"

    def __post_init__(self) -> None:
        if self.start != len(self.prefix):
            raise ValueError(f"start must be len(prefix) ({len(self.prefix)}), got {self.start!r}")

    @property
    def prefix_text(self) -> str:
        """The text of the logged prefix (its ``str`` parts joined): what a continuation writes on from."""
        return "".join(part for part in self.prefix if isinstance(part, str))


# A factory returns what its model yields, sync or async, or an awaitable of it (``asgi.model_start`` calls it):
# ``str`` (text), tokenwire's parts, or a client's stream objects (``models.yields``).
Tokens = AsyncIterable[Any] | Iterable[Any]
ModelFactory = Callable[[StreamRequest], Tokens | Awaitable[Tokens]]
