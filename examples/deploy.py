"""tokenwire deployed: your model behind a bearer token, a front end on another origin, metrics, a shared Redis log.

Run it (``pip install 'tokenwire[asgi,redis,metrics]'``), as many processes as you like on one Redis:

    TOKENWIRE_LOG_URL=redis://127.0.0.1:6379/0 \\
    FRONT_END_ORIGIN=https://chat.example.com \\
    API_TOKENS=alice-token:alice,bob-token:bob METRICS_TOKEN=scraper-token \\
    uvicorn deploy:app --app-dir examples --host 0.0.0.0 --port 8000

- ``authorize`` takes a bearer token (``Authorization: Bearer alice-token``,
  what an API client or ``fetch`` sends) or a ``session`` cookie (what a
  browser's ``EventSource`` sends with ``withCredentials``, as it cannot set
  headers; taken only from ``FRONT_END_ORIGIN``'s pages) and names the user.  ``API_TOKENS`` stands in for your session
  store or key check.  No credentials: 401.  Bob asking for Alice's stream:
  the 404 of an id that does not exist, on every process.
- The model sees who asks (``request.principal``) and the request's headers.
  Replace ``model`` with yours (an OpenAI-style stream works the same).
- ``CORSMiddleware`` (Starlette's) lets the front end at ``FRONT_END_ORIGIN``
  create streams, read them with ``EventSource``, resume them with ``fetch``
  and ``Last-Event-ID``, and read the AI SDK's ``x-workflow-run-id`` and
  ``x-workflow-stream-tail-index``.
- ``TOKENWIRE_LOG_URL`` (unset: memory, one process) is read by
  ``TokenStreams``: with Redis, any process resumes any stream, and with
  ``takeover="continue"`` one continues your model when the process that ran
  it dies; the request's headers are kept in Redis for that, but
  ``authorization`` and ``cookie``.
- ``/tokens/metrics``: this process's figures for Prometheus (scrape each process),
  asked of ``authorize`` too (``action == "scrape"``): the scraper sends
  ``Authorization: Bearer <METRICS_TOKEN>`` (Prometheus's
  ``authorization: {credentials: ...}``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from http.cookies import CookieError, SimpleCookie

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from tokenwire.asgi import Access, StreamRequest, TokenStreams

# Where the front end is served from, exactly (credentials rule out "*").
FRONT_END_ORIGIN = os.environ.get("FRONT_END_ORIGIN", "http://localhost:3000")
# token -> user: a stand-in for your session store or API keys ("alice-token:alice,bob-token:bob").
USERS = dict(pair.split(":", 1) for pair in os.environ.get("API_TOKENS", "").split(",") if ":" in pair)
# The token Prometheus scrapes /metrics with (unset: nobody may).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
# How long the example model thinks per word.
WORD_DELAY_S = float(os.environ.get("WORD_DELAY_S", "0.02"))


def authorize(access: Access) -> str | None:
    """The user a bearer token or a ``session`` cookie names (the scraper, for ``/metrics``); None (401) for neither.

    A cookie counts only from the front end (or with no ``Origin``: not a
    browser's cross-origin request): a browser sends it along with a plain
    ``POST`` any other site's page makes, and would create or stop streams
    in the user's name (the page never reads the answer, but the model runs).
    """
    scheme, _, token = access.headers.get("authorization", "").partition(" ")
    if access.action == "scrape":
        return "prometheus" if METRICS_TOKEN and scheme.lower() == "bearer" and token == METRICS_TOKEN else None
    if scheme.lower() != "bearer":
        if access.headers.get("origin", FRONT_END_ORIGIN) != FRONT_END_ORIGIN:
            return None
        try:
            session = SimpleCookie(access.headers.get("cookie", "")).get("session")
        except CookieError:
            return None
        token = session.value if session is not None else ""
    return USERS.get(token)


def prompt_of(request: StreamRequest) -> str:
    """What was asked: ``?prompt=`` on ``POST /streams``, the last user message's text on ``POST /chat``."""
    if request.chat is None:
        return request.params.get("prompt", "hello")
    for message in reversed(request.chat.messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return " ".join(str(part.get("text", "")) for part in message.get("parts", []) if isinstance(part, dict))
    return "hello"


async def model(request: StreamRequest) -> AsyncIterator[str]:
    """Your model: here, it answers the user by name, a word at a time (continued after ``request.prefix``)."""
    words = f"{request.principal}, you asked: {prompt_of(request)}".split()
    for index in range(request.start, len(words)):
        await asyncio.sleep(WORD_DELAY_S)
        yield words[index] if index == 0 else " " + words[index]


streams = TokenStreams(model, authorize=authorize, takeover="continue", metrics=True)
app = FastAPI(lifespan=streams.lifespan)          # shutdown stops (or hands off) the models still running
app.mount("/tokens", streams)                     # with metrics=True, Prometheus scrapes /tokens/metrics
# cors-config
app.add_middleware(
    CORSMiddleware,
    allow_origins=[FRONT_END_ORIGIN],
    allow_credentials=True,        # EventSource(url, {withCredentials: true}); fetch(url, {credentials: "include"})
    allow_methods=["GET", "POST"],
    allow_headers=["authorization", "content-type", "last-event-id"],
    expose_headers=["x-workflow-run-id", "x-workflow-stream-tail-index", "location"],
    max_age=600,
)
# end cors-config
