"""``Upstream``: a model factory that relays any OpenAI-compatible server's chat completions, part by part.

How this works: called with a ``StreamRequest`` (``TokenStreams(Upstream(...))``
calls it once per stream), it returns an async iterator that posts the
request's messages (``messages``) and every field it does not own
(``fields``: tools, tool_choice, response_format, ...) to the upstream's
``/chat/completions`` with ``"stream": true`` and
``stream_options.include_usage``, and yields each part of the answer as the
frames come (``frames``): text, reasoning, refusal, tool calls, the finish
reason and the usage.  One pooled ``httpx.AsyncClient`` per event loop serves every
stream, with a connect timeout.  Each answer has three bounds (``Deadlines``,
``max_answer_tokens``), so none is a hang: no data (an event; a comment such
as ``: ping`` is none) for ``read_timeout_s`` is ``UpstreamStalled``; more
than ``max_answer_tokens`` tokens is ``UpstreamTooLong``; longer than
``max_answer_s`` in all is ``UpstreamOvertime``: each ends the stream
``failed`` with its name, the upstream's request closed.  An answer that is
not an event stream (a status other than 200, a redirect, a 200 of another
content type) names its status or its content type.  Every request asks for
``Accept-Encoding: identity`` and every body is read raw (``aiter_raw``):
httpx inflates nothing, so no bound is passed before it applies (32 KB of
zstd are 1 GiB); a 200 compressed all the same is ``UpstreamMalformed``
naming its encoding (a refusal's status is named, its compressed body not
quoted), and a model list is read up to ``MAX_MODEL_LIST_BYTES``.  Every
failure is one of ``UpstreamError``'s kinds, named in the
reader's ``failed`` event and logged once with its message (never the API
key: it is read from the environment variable the config names, sent in the
``Authorization`` header only, and kept out of every ``repr``), nor the
password of a ``user:password@`` URL: every message, and the config's
``repr``, shows the URL redacted (``where``).

Continuation (``TokenStreams(takeover="continue")``: the process relaying a
stream died and another goes on): the request comes back with the logged
prefix, sent as the assistant's partial turn with ``continue_final_message:
true, add_generation_prompt: false`` (vLLM's and SGLang's), so the upstream
continues the same answer.  An upstream the config does not say supports
this (``continue_final_message=False``) cannot continue an answer: the
continuation fails at once (``UpstreamCannotContinue``) rather than append a
second answer to the first.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..core.parts import Part
from ..core.sse import IDENTITY, compressed, not_compressed, not_read
from ..models import MAX_MODEL_TOKENS, StreamRequest
from ..redislog.redact import redact_url, scrub
from .fields import fields_of
from .frames import (
    QUOTE_CHARS,
    UpstreamBroken,
    UpstreamError,
    UpstreamFrames,
    UpstreamMalformed,
    UpstreamRefused,
    UpstreamStalled,
    UpstreamStatus,
    quote,
)
from .messages import continued, messages_of

__all__ = ["DEFAULT_CONNECT_TIMEOUT_S", "DEFAULT_MAX_ANSWER_S", "DEFAULT_MAX_ANSWER_TOKENS", "DEFAULT_READ_TIMEOUT_S",
           "Upstream", "UpstreamCannotContinue", "UpstreamConfig", "UpstreamOvertime", "UpstreamTooLong"]

# How long reaching the upstream may take: a server on the same network answers a connect in milliseconds.
DEFAULT_CONNECT_TIMEOUT_S = 5.0
# How long the upstream may send nothing: past a long prompt's first token (a model loading, a long prefill)
# and well short of a reader giving up.
DEFAULT_READ_TIMEOUT_S = 60.0
# Connections to the upstream at once, per event loop: tokenwire's own limit on open streams is far above
# what one model server runs at once; the pool queues the rest (the pool timeout is the read timeout).
DEFAULT_MAX_CONNECTIONS = 256
# The most tokens one answer may have: past the longest answer today's models give (they cap their output at
# 8k to 32k tokens), and below what a stream's log keeps (MAX_MODEL_TOKENS), so an upstream that never says
# it is done ends with a name rather than at the log's limit.
DEFAULT_MAX_ANSWER_TOKENS = 32_768
# The longest one answer may take in all: an answer of DEFAULT_MAX_ANSWER_TOKENS at 18 tokens/s (a small
# model on a CPU) still fits; one still going after half an hour is an upstream that does not end.
DEFAULT_MAX_ANSWER_S = 1800.0
# The longest an answer may be allowed to take: a day, past any answer (a longer bound is no bound).
MAX_ANSWER_S = 86_400.0
# How much of a refused answer's body is read to quote it: QUOTE_CHARS characters of UTF-8 at most (the rest
# is never read: an error page may be large).
QUOTED_BYTES = 4 * QUOTE_CHARS
# The longest model list read from the upstream's /models: a server's own list is a few KB, an aggregator's of
# hundreds of models with their metadata a few MB; a longer body is no model list, and is refused, not read whole.
MAX_MODEL_LIST_BYTES = 16 << 20


class UpstreamCannotContinue(UpstreamError):
    """A continuation was asked of an upstream the config does not say continues a partial answer."""


class UpstreamTooLong(UpstreamError):
    """The upstream's answer went on past ``max_answer_tokens`` tokens (``--max-answer-tokens``)."""


class UpstreamOvertime(UpstreamError):
    """The upstream's answer went on past ``max_answer_s`` seconds in all (``--max-answer-s``)."""


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    """Where the upstream is and how to talk to it.

    url: its OpenAI base URL (``http://127.0.0.1:8000/v1``: ``/chat/completions`` is added); model: the
    model to ask for (None: the request's ``model``); api_key_env: the environment variable holding its API
    key (None: none sent); continue_final_message: it continues an assistant's partial turn (vLLM, SGLang);
    connect_timeout_s, read_timeout_s (how long the upstream may send no data), max_answer_tokens,
    max_answer_s (the most tokens and seconds one answer may take): see the module; max_connections: the
    pool's size per event loop.
    """

    url: str
    model: str | None = None
    api_key_env: str | None = None
    continue_final_message: bool = False
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_answer_tokens: int = DEFAULT_MAX_ANSWER_TOKENS
    max_answer_s: float = DEFAULT_MAX_ANSWER_S

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            shown = redact_url(self.url) if isinstance(self.url, str) else self.url
            raise ValueError(f"the upstream URL must start with http:// or https://, got {shown!r}")
        for name in ("connect_timeout_s", "read_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
                raise ValueError(f"{name} must be a number of seconds from 0 to 3600, got {value!r}")
        if isinstance(self.max_connections, bool) or not isinstance(self.max_connections, int) \
                or self.max_connections < 1:
            raise ValueError(f"max_connections must be a positive int, got {self.max_connections!r}")
        tokens = self.max_answer_tokens
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_MODEL_TOKENS:
            raise ValueError(f"max_answer_tokens must be an int from 1 to {MAX_MODEL_TOKENS} (the most a stream "
                             f"keeps), got {tokens!r}")
        answer_s = self.max_answer_s
        if isinstance(answer_s, bool) or not isinstance(answer_s, (int, float)) or not 0 < answer_s <= MAX_ANSWER_S:
            raise ValueError(f"max_answer_s must be a number of seconds from 0 to {MAX_ANSWER_S:g}, got {answer_s!r}")
        if self.api_key_env is not None and not os.environ.get(self.api_key_env):
            raise ValueError(f"the environment variable {self.api_key_env!r} (the upstream's API key) is not set")

    def __repr__(self) -> str:          # a config that is logged logs no password
        return (f"UpstreamConfig(url={self.where!r}, model={self.model!r}, api_key_env={self.api_key_env!r}, "
                f"continue_final_message={self.continue_final_message!r}, connect_timeout_s="
                f"{self.connect_timeout_s!r}, read_timeout_s={self.read_timeout_s!r}, "
                f"max_connections={self.max_connections!r}, max_answer_tokens={self.max_answer_tokens!r}, "
                f"max_answer_s={self.max_answer_s!r})")

    @property
    def where(self) -> str:
        """The URL as output shows it: its password (``user:password@``, ``?password=``) as ``***``."""
        return redact_url(self.url)

    @property
    def endpoint(self) -> str:
        """The upstream's chat completions URL."""
        return self.url.rstrip("/") + "/chat/completions"


@dataclass(eq=False)
class Upstream:
    """The model factory relaying ``config``'s upstream (see the module); call ``aclose`` to close its pools."""

    config: UpstreamConfig
    _clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = field(
        default_factory=weakref.WeakKeyDictionary, repr=False)

    def __call__(self, request: StreamRequest) -> AsyncIterator[str | Part]:
        body = self.body(request)
        if request.prefix and not self.config.continue_final_message:
            return self._cannot_continue()
        return self._relay(body, len(request.prefix))

    async def _cannot_continue(self) -> AsyncIterator[str | Part]:
        raise UpstreamCannotContinue(f"the upstream at {self.config.where} is not configured to continue a "
                                     f"partial answer (continue_final_message)")
        yield ""            # unreachable: it makes this an async generator

    def body(self, request: StreamRequest) -> dict[str, Any]:
        """The chat completion ``request`` asks the upstream for; raises ``ValueError`` (a 400) without a model, or
        for a field that cannot be sent (``n`` other than 1, a tool that is no function)."""
        model = self.config.model or _model_of(request)
        if model is None:
            raise ValueError("this request names no model and the proxy has none of its own (--model)")
        messages = messages_of(request)
        body: dict[str, Any] = {**fields_of(request), "model": model, "stream": True}
        if request.prefix:
            messages = continued(messages, request.prefix_text)
            body.update(continue_final_message=True, add_generation_prompt=False)
        body["messages"] = messages
        return body

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            config = self.config
            # Each read within the answer's own bounds (``Deadlines`` reads a chunk within what is left of them).
            timeout = httpx.Timeout(min(config.read_timeout_s, config.max_answer_s), connect=config.connect_timeout_s)
            limits = httpx.Limits(max_connections=config.max_connections,
                                  max_keepalive_connections=config.max_connections)
            key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
            headers = {"Accept-Encoding": IDENTITY, **({"Authorization": f"Bearer {key}"} if key else {})}
            client = self._clients[loop] = httpx.AsyncClient(timeout=timeout, limits=limits, headers=headers)
        return client

    async def _relay(self, body: dict[str, Any], tokens: int) -> AsyncIterator[str | Part]:
        """The upstream's answer to ``body``, its parts one by one; ``tokens``: how many the answer has already."""
        frames, deadlines = UpstreamFrames(), Deadlines(self.config)
        url = self.config.endpoint
        shown = redact_url(url)
        try:
            async with self._client().stream("POST", url, json=body) as response:
                await _check_head(response, shown, deadlines)
                chunks = response.aiter_raw()
                while (chunk := await deadlines.next(chunks, frames.events)) is not None:
                    for part in frames.feed(chunk):
                        tokens += 1
                        if tokens > self.config.max_answer_tokens:
                            raise UpstreamTooLong(f"the upstream at {shown} went on past max_answer_tokens "
                                                  f"({self.config.max_answer_tokens} tokens) without ending")
                        yield part
                    if frames.done:
                        return
                if frames.finished:           # closed after its finish_reason, with no [DONE]: whole all the same
                    for part in frames.close():
                        yield part
                    return
        except httpx.ConnectError as exc:
            raise UpstreamRefused(f"cannot reach the upstream at {shown}: {scrub(str(exc), url)}") from None
        except httpx.ConnectTimeout:
            raise UpstreamRefused(f"the upstream at {shown} did not accept a connection within "
                                  f"{self.config.connect_timeout_s:g} s") from None
        except (httpx.ReadTimeout, httpx.PoolTimeout, TimeoutError):
            raise deadlines.expired(shown) from None
        except httpx.TransportError as exc:
            raise UpstreamBroken(f"the connection to the upstream at {shown} broke: {type(exc).__name__}") from None
        raise UpstreamBroken(f"the upstream at {shown} ended its stream before the answer's end ([DONE])")

    async def model_ids(self) -> list[str]:
        """The models ``GET /v1/models`` lists: ``--model``, else the upstream's own ``/models``.

        Raises an ``UpstreamError`` kind (refused, stalled: no answer within the read timeout, a status, a body that
        is not a model list, or is compressed, or longer than ``MAX_MODEL_LIST_BYTES``).
        """
        if self.config.model is not None:
            return [self.config.model]
        url = self.config.url.rstrip("/") + "/models"
        try:
            async with self._client().stream("GET", url) as response:
                if response.status_code >= 400:
                    said = _not_read(response) or quote(_text(await _read_up_to(response.aiter_raw(), QUOTED_BYTES)))
                    raise UpstreamStatus(f"the upstream answered {response.status_code}: {said}")
                _check_identity(response, redact_url(url), "a model list")
                listed = await _read_up_to(response.aiter_raw(), MAX_MODEL_LIST_BYTES + 1)
        except (httpx.ReadTimeout, httpx.PoolTimeout):
            raise UpstreamStalled(f"the upstream at {redact_url(url)} did not answer within "
                                  f"{self.config.read_timeout_s:g} s") from None
        except httpx.TransportError as exc:
            raise UpstreamRefused(f"cannot list the models of the upstream at {redact_url(url)}: "
                                  f"{type(exc).__name__}") \
                from None
        if len(listed) > MAX_MODEL_LIST_BYTES:
            raise UpstreamMalformed(f"the upstream's model list at {redact_url(url)} is longer than "
                                    f"MAX_MODEL_LIST_BYTES ({MAX_MODEL_LIST_BYTES} bytes)")
        try:
            return [str(model["id"]) for model in json.loads(listed)["data"]]
        except (ValueError, KeyError, TypeError):
            raise UpstreamMalformed(f"the upstream's model list is not one: {quote(_text(listed))}") from None

    async def aclose(self) -> None:
        """Close this event loop's pool (a new one is made if the factory is called again)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()


class Deadlines:
    """An answer's two clocks: the last data (``read_timeout_s``) and the whole answer (``max_answer_s``).

    The first restarts at each event the upstream sends, never at a comment;
    the second runs from the request on.  ``next`` reads the next chunk
    within whichever ends first, raising ``TimeoutError`` past it, and
    ``expired`` is the error that names the one that ran out.
    """

    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        now = time.monotonic()
        self.answer_ends = now + config.max_answer_s
        self.data_ends = now + config.read_timeout_s
        self._events = 0

    def left_s(self) -> float:
        """Seconds until the first deadline (0 or less: one has passed)."""
        return min(self.answer_ends, self.data_ends) - time.monotonic()

    async def next(self, chunks: AsyncIterator[bytes], events: int) -> bytes | None:
        """The next chunk of ``chunks`` (None at its end), ``events`` the events read so far."""
        if events != self._events:
            self._events, self.data_ends = events, time.monotonic() + self.config.read_timeout_s
        left = self.left_s()
        if left <= 0:
            raise TimeoutError
        async with asyncio.timeout(left):
            return await anext(chunks, None)

    def expired(self, shown: str) -> UpstreamError:
        """The error of the deadline that ran out first, for the upstream shown as ``shown``."""
        if self.answer_ends <= self.data_ends:
            return UpstreamOvertime(f"the upstream at {shown} went on past max_answer_s ({self.config.max_answer_s:g} "
                                    f"s) without ending")
        return UpstreamStalled(f"the upstream at {shown} sent no data for {self.config.read_timeout_s:g} s")


def _model_of(request: StreamRequest) -> str | None:
    """The model a request names: an OpenAI body's, or the one the AI SDK's ``body`` option adds to a chat's."""
    if request.openai is not None:
        return request.openai.model
    named = request.chat.body.get("model") if request.chat is not None else None
    if named is not None and (not isinstance(named, str) or not named):
        raise ValueError(f"a chat body's model must be a non-empty string, got {named!r}")
    return named


async def _check_head(response: httpx.Response, shown: str, deadlines: Deadlines) -> None:
    """Raise the ``UpstreamError`` of an answer that is not an event stream, naming its status, its encoding or its
    content type."""
    status, kind = response.status_code, response.headers.get("content-type", "")
    if status >= 400:
        said = _not_read(response) or quote(await _start_of(response, deadlines))
        raise UpstreamStatus(f"the upstream answered {status}: {said}")
    if status != 200:
        location = response.headers.get("location")
        where = f", to {redact_url(location)!r}" if location else ""
        raise UpstreamStatus(f"the upstream at {shown} answered {status} {response.reason_phrase}{where}, not 200 "
                             f"with an event stream")
    _check_identity(response, shown, "an SSE stream")
    if kind and kind.split(";")[0].strip().lower() != "text/event-stream":
        raise UpstreamMalformed(f"the upstream at {shown} answered 200 with content type {kind!r}, not "
                                f"text/event-stream: {quote(await _start_of(response, deadlines))}")


def _encoding(response: httpx.Response) -> str:
    """The answer's ``Content-Encoding`` if it says its body is compressed, else "" (``core.sse.compressed``)."""
    return compressed(response.headers.get("content-encoding", ""))


def _check_identity(response: httpx.Response, shown: str, what: str) -> None:
    """Raise ``UpstreamMalformed`` for a 200 whose body is compressed (it is never inflated), naming its encoding."""
    if encoding := _encoding(response):
        raise UpstreamMalformed(f"the upstream at {shown} answered with {not_compressed(encoding, what)}")


def _not_read(response: httpx.Response) -> str:
    """What a refusal's error says in place of its body when that is compressed (it is never inflated), else ""."""
    encoding = _encoding(response)
    return not_read(encoding) if encoding else ""


async def _start_of(response: httpx.Response, deadlines: Deadlines) -> str:
    """The start of ``response``'s body (``QUOTED_BYTES`` at most, within the deadlines), as an error quotes it."""
    said = bytearray()
    chunks = response.aiter_raw()
    while len(said) < QUOTED_BYTES and (chunk := await deadlines.next(chunks, 0)) is not None:
        said += chunk
    return _text(bytes(said[:QUOTED_BYTES]))


async def _read_up_to(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """The first ``limit`` bytes of ``chunks`` (all of them if fewer); the rest is never read."""
    said = bytearray()
    async for chunk in chunks:
        said += chunk
        if len(said) >= limit:
            break
    return bytes(said[:limit])


def _text(said: bytes) -> str:
    """A body's bytes as an error quotes them (UTF-8; what is not is replaced)."""
    return said.decode("utf-8", "replace")
