"""``Upstream``: a model factory that relays any OpenAI-compatible server's chat completions, token by token.

How this works: called with a ``StreamRequest`` (``TokenStreams(Upstream(...))``
calls it once per stream), it returns an async iterator that posts the
request's messages (``messages``) to the upstream's ``/chat/completions``
with ``"stream": true`` and yields each text piece as the frames come
(``frames``).  One pooled ``httpx.AsyncClient`` per event loop serves every
stream; it has a connect timeout and a read timeout, so an upstream that
stalls past it ends the stream ``failed`` (``UpstreamStalled``), never a
hang.  Every failure is one of ``UpstreamError``'s kinds, named in the
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
import os
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..asgi.model_stream import StreamRequest
from ..redislog.redact import redact_url, scrub
from .frames import (
    UpstreamBroken,
    UpstreamError,
    UpstreamFrames,
    UpstreamMalformed,
    UpstreamRefused,
    UpstreamStalled,
    UpstreamStatus,
    quote,
)
from .messages import continued, messages_of, sampling_of

__all__ = ["DEFAULT_CONNECT_TIMEOUT_S", "DEFAULT_READ_TIMEOUT_S", "Upstream", "UpstreamCannotContinue",
           "UpstreamConfig"]

# How long reaching the upstream may take: a server on the same network answers a connect in milliseconds.
DEFAULT_CONNECT_TIMEOUT_S = 5.0
# How long the upstream may send nothing: past a long prompt's first token (a model loading, a long prefill)
# and well short of a reader giving up.
DEFAULT_READ_TIMEOUT_S = 60.0
# Connections to the upstream at once, per event loop: tokenwire's own limit on open streams is far above
# what one model server runs at once; the pool queues the rest (the pool timeout is the read timeout).
DEFAULT_MAX_CONNECTIONS = 256


class UpstreamCannotContinue(UpstreamError):
    """A continuation was asked of an upstream the config does not say continues a partial answer."""


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    """Where the upstream is and how to talk to it.

    url: its OpenAI base URL (``http://127.0.0.1:8000/v1``: ``/chat/completions`` is added); model: the
    model to ask for (None: the request's ``model``); api_key_env: the environment variable holding its API
    key (None: none sent); continue_final_message: it continues an assistant's partial turn (vLLM, SGLang);
    connect_timeout_s, read_timeout_s: see the module; max_connections: the pool's size per event loop.
    """

    url: str
    model: str | None = None
    api_key_env: str | None = None
    continue_final_message: bool = False
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS

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
        if self.api_key_env is not None and not os.environ.get(self.api_key_env):
            raise ValueError(f"the environment variable {self.api_key_env!r} (the upstream's API key) is not set")

    def __repr__(self) -> str:          # a config that is logged logs no password
        return (f"UpstreamConfig(url={self.where!r}, model={self.model!r}, api_key_env={self.api_key_env!r}, "
                f"continue_final_message={self.continue_final_message!r}, connect_timeout_s="
                f"{self.connect_timeout_s!r}, read_timeout_s={self.read_timeout_s!r}, "
                f"max_connections={self.max_connections!r})")

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

    def __call__(self, request: StreamRequest) -> AsyncIterator[str]:
        body = self.body(request)
        if request.prefix and not self.config.continue_final_message:
            return self._cannot_continue()
        return self._relay(body)

    async def _cannot_continue(self) -> AsyncIterator[str]:
        raise UpstreamCannotContinue(f"the upstream at {self.config.where} is not configured to continue a "
                                     f"partial answer (continue_final_message)")
        yield ""            # unreachable: it makes this an async generator

    def body(self, request: StreamRequest) -> dict[str, Any]:
        """The chat completion ``request`` asks the upstream for; raises ``ValueError`` (a 400) without a model."""
        model = self.config.model or (request.openai.model if request.openai is not None else None)
        if model is None:
            raise ValueError("this request names no model and the proxy has none of its own (--model)")
        messages = messages_of(request)
        body: dict[str, Any] = {**sampling_of(request), "model": model, "stream": True}
        if request.prefix:
            messages = continued(messages, "".join(request.prefix))
            body.update(continue_final_message=True, add_generation_prompt=False)
        body["messages"] = messages
        return body

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            config = self.config
            timeout = httpx.Timeout(config.read_timeout_s, connect=config.connect_timeout_s)
            limits = httpx.Limits(max_connections=config.max_connections,
                                  max_keepalive_connections=config.max_connections)
            key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            client = self._clients[loop] = httpx.AsyncClient(timeout=timeout, limits=limits, headers=headers)
        return client

    async def _relay(self, body: dict[str, Any]) -> AsyncIterator[str]:
        frames = UpstreamFrames()
        url = self.config.endpoint
        shown = redact_url(url)
        try:
            async with self._client().stream("POST", url, json=body) as response:
                if response.status_code >= 400:
                    said = (await response.aread()).decode("utf-8", "replace")
                    raise UpstreamStatus(f"the upstream answered {response.status_code}: {quote(said)}")
                async for chunk in response.aiter_bytes():
                    for piece in frames.feed(chunk):
                        yield piece
                    if frames.done:
                        return
        except httpx.ConnectError as exc:
            raise UpstreamRefused(f"cannot reach the upstream at {shown}: {scrub(str(exc), url)}") from None
        except httpx.ConnectTimeout:
            raise UpstreamRefused(f"the upstream at {shown} did not accept a connection within "
                                  f"{self.config.connect_timeout_s:g} s") from None
        except (httpx.ReadTimeout, httpx.PoolTimeout):
            raise UpstreamStalled(f"the upstream at {shown} sent nothing for {self.config.read_timeout_s:g} s") \
                from None
        except httpx.TransportError as exc:
            raise UpstreamBroken(f"the connection to the upstream at {shown} broke: {type(exc).__name__}") from None
        raise UpstreamBroken(f"the upstream at {shown} ended its stream before the answer's end ([DONE])")

    async def model_ids(self) -> list[str]:
        """The models ``GET /v1/models`` lists: ``--model``, else the upstream's own ``/models``.

        Raises an ``UpstreamError`` kind (refused, a status, a body that is not a model list).
        """
        if self.config.model is not None:
            return [self.config.model]
        url = self.config.url.rstrip("/") + "/models"
        try:
            response = await self._client().get(url)
        except httpx.TransportError as exc:
            raise UpstreamRefused(f"cannot list the models of the upstream at {redact_url(url)}: "
                                  f"{type(exc).__name__}") \
                from None
        if response.status_code >= 400:
            raise UpstreamStatus(f"the upstream answered {response.status_code}: {quote(response.text)}")
        try:
            return [str(model["id"]) for model in response.json()["data"]]
        except (ValueError, KeyError, TypeError):
            raise UpstreamMalformed(f"the upstream's model list is not one: {quote(response.text)}") from None

    async def aclose(self) -> None:
        """Close this event loop's pool (a new one is made if the factory is called again)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
