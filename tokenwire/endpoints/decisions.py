"""What goes into the endpoint layer and what comes out: a parsed request in, a plain decision out.

How this works: an adapter (``tokenwire.live`` over h11, ``tokenwire.asgi``
over ASGI) turns what its server hands it into a ``LiveRequest`` and gives it
to ``Endpoints.decide``, which answers with an ``Answer`` (a whole response:
a refusal, the ``201`` of a new stream, a ``204``) for the adapter to write
as it is, or an ``OpenStream`` (a stream to write from a cursor) for the
adapter to hand a wire to.  Neither side looks inside the other: the
adapters never decide a status, the endpoints never touch a socket.  A
``StreamMaker`` (the canned answer, a user's model) is what the routes ask
to read a request's body and make its stream; what the stream does when its
last reader leaves is the route's promise where its dialect makes one
(``promised_leave``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.pipeline import RunSpec
from ..core.rendering import FRAMES, Rendering
from ..core.sources import OnDisconnect
from .registry import LiveStream

__all__ = ["CHAT_COMPLETIONS", "RESPONSES", "Answer", "Asked", "ChatRequest", "Headers", "LiveRequest",
           "OpenAIRequest", "OpenStream", "StreamMaker", "promised_leave"]

Headers = tuple[tuple[str, str], ...]
# The two OpenAI APIs (``OpenAIRequest.api``).
CHAT_COMPLETIONS, RESPONSES = "chat.completions", "responses"


@dataclass(frozen=True, slots=True)
class LiveRequest:
    """One request as the endpoints read it.

    path: the path under the mount point; query: the query string as UTF-8
    text (bad bytes as U+FFFD); headers: lower-case names with their values
    as Latin-1 text, in order; client: the peer's address ("-" if unknown);
    root_path: where the routes are mounted ("" at the top); principal:
    who the app's ``authorize`` hook said asks (None: the app has none).
    """

    method: str
    path: str
    query: str
    headers: Headers
    client: str
    root_path: str = ""
    principal: str | None = None

    def header_values(self, name: str) -> list[str]:
        """Every value of header ``name`` (lower-case)."""
        return [value for key, value in self.headers if key == name]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A ``POST /chat`` body, read.

    chat_id: the body's ``id`` (None: the transport sent none, as
    ``WorkflowChatTransport`` does; the stream id then names the chat);
    messages: the UI messages as sent (JSON values); trigger:
    ``"submit-message"`` or ``"regenerate-message"`` (None if absent);
    message_id: the ``messageId`` sent; body: the whole JSON object, the
    app's own fields included; chat_messages: the messages as a chat
    completion's, tool calls and results included (``ui_messages``);
    continues: the id of the assistant message the answer goes on with (the
    last message, when it carries the client's tool outputs), else None.
    """

    chat_id: str | None
    messages: tuple[Any, ...]
    trigger: str | None
    message_id: str | None
    body: Mapping[str, Any]
    chat_messages: tuple[dict[str, Any], ...] = ()
    continues: str | None = None


@dataclass(frozen=True, slots=True)
class OpenAIRequest:
    """A ``POST /v1/chat/completions`` or ``POST /v1/responses`` body, read.

    api: ``"chat.completions"`` or ``"responses"``; model: the ``model``
    asked for; messages: a chat completion's messages as sent (empty for a
    response); input: a response's ``input`` as sent (a string or a list of
    items; None for a chat completion); stream, background: what was asked;
    body: the whole JSON object, every other field included.
    """

    api: str
    model: str
    messages: tuple[Any, ...]
    input: Any
    stream: bool
    background: bool
    body: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Asked:
    """A create request, read: the canned answer's ``spec`` or a model's ``params``, its ``cut_after``, its chat.

    openai: the OpenAI request it came in as (None: another route).
    """

    spec: RunSpec | None
    params: Mapping[str, str]
    cut: int | None
    chat: ChatRequest | None = None
    openai: OpenAIRequest | None = None


def promised_leave(asked: Asked) -> OnDisconnect | None:
    """What the stream ``asked`` makes does when its last reader leaves, where its route's dialect promises it.

    ``/chat``: it runs to its end (``detach``), for the AI SDK's resume to
    find; a response: the same, for ``GET /v1/responses/<id>`` and
    background mode; a chat completion: it stops (``cancel``), as OpenAI's
    does, so no model runs for nobody.  None for tokenwire's own routes:
    the stream's setting (the query's, the app's ``on_disconnect``) says.
    """
    if asked.chat is not None:
        return OnDisconnect.DETACH
    if asked.openai is not None:
        return OnDisconnect.DETACH if asked.openai.api == RESPONSES else OnDisconnect.CANCEL
    return None


@dataclass(frozen=True, slots=True)
class Answer:
    """A complete response: status, headers without ``Content-Length``, body."""

    status: int
    headers: Headers
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class OpenStream:
    """An event stream to write: ``live`` from after ``cursor`` (-1: from the start).

    cut: the ``cut_after`` the request asked for (None: the stream's own, if
    any); header / query_id: the ``Last-Event-ID`` header and
    ``?last_event_id=`` as sent; rendering: how the connection puts the
    stream on the wire (tokenwire's frames, or the AI SDK's chunks);
    headers: what the ``200`` adds to the event-stream headers; arrived_ns:
    when the request reached the endpoints (``perf_counter_ns``; 0: not
    metered); resumed: the request named a place the reader holds
    (``Last-Event-ID`` or ``last_event_id``, a chat's ``startIndex`` past 0,
    ``starting_after``), which ``tokenwire_resumes_total`` counts, even one
    still before the first token.  One open-stream slot is held for it: the
    adapter passes it to ``Endpoints.write`` or gives it back with
    ``Endpoints.release``, exactly once.
    """

    live: LiveStream
    cursor: int
    cut: int | None
    header: str | None
    query_id: str | None
    rendering: Rendering = FRAMES
    headers: Headers = ()
    arrived_ns: int = 0
    resumed: bool = False


class StreamMaker(Protocol):
    """What makes a new stream: the canned answer or a user's model."""

    def parse(self, query: str) -> Asked:
        """Read a create query; raises ``RequestError`` (400)."""

    def parse_chat(self, chat: ChatRequest) -> Asked:
        """Read a ``POST /chat`` body; raises ``RequestError`` (400)."""

    def parse_openai(self, request: OpenAIRequest) -> Asked:
        """Read a ``POST /v1/chat/completions`` or ``/v1/responses`` body; raises ``RequestError`` (400)."""

    async def model_ids(self) -> list[str]:
        """The models ``GET /v1/models`` lists; raises ``RequestError`` (a 502: an upstream that cannot say)."""

    async def make(self, asked: Asked, request: LiveRequest, body: bytes) -> LiveStream:
        """Make the stream ``asked`` describes (admitted already); raises ``RequestError``, ``LogError``."""
