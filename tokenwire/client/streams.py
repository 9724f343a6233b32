"""``events`` and ``aevents``: the reconnect state of ``reconnect`` driven over httpx, blocking and async.

How this works: each loop asks the state for a request, waits what it says,
sends it, and hands back what came: a status that is not 200 (with the
first ``MAX_ERROR_BODY`` bytes of its body), or the body's chunks of a 200,
then how the connection ended.  Every decision (resume, retry, backoff, the
end, the errors) is the state's; the two loops differ only by ``await``.
An ``httpx.TransportError`` (refused, reset, timed out, a chunked body cut
short) is a dropped connection.  Every request asks for ``Accept-Encoding:
identity`` (httpx would ask for gzip, deflate, zstd and br) and the body is
read raw (``iter_raw``): httpx inflates nothing, so 32 KB of zstd never
become 1 GiB before the decoder's bounds apply; a server that compresses
all the same is refused by the state, naming its encoding.  No message
names the URL's userinfo: httpx's text is scrubbed of its password
(``redislog.redact``), and a URL httpx cannot send is refused at the call,
shown redacted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from random import random as _random

import httpx

from ..core.sse import IDENTITY, Event
from ..redislog.redact import redact_url, scrub
from .reconnect import DEFAULT_MAX_ATTEMPTS, END_EVENTS, Backoff, Reconnect, Request

__all__ = ["DEFAULT_TIMEOUT", "MAX_ERROR_BODY", "aevents", "events"]

# Connecting gives up after 10 s; reading after 60 s of silence, four times
# tokenwire's 15 s heartbeat, so a quiet stream is never taken for a dead one.
DEFAULT_TIMEOUT = httpx.Timeout(10.0, read=60.0)
# A refusal's body is read this far: its message is one line.
MAX_ERROR_BODY = 4096
# What a connection that ends before the end event is reported as.
CLOSED = "the connection closed before the end event"
# Sent on every request unless the caller sends its own: the body as sent, which is what the decoder bounds.
ACCEPT_ENCODING = (b"Accept-Encoding", IDENTITY.encode())


def events(url: str, *, headers: Mapping[str, str] | None = None, last_event_id: str | None = None,
           max_attempts: int = DEFAULT_MAX_ATTEMPTS, backoff: Backoff | None = None,
           timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT, client: httpx.Client | None = None,
           end_events: Collection[str] = END_EVENTS, sleep: Callable[[float], object] = time.sleep,
           random: Callable[[], float] = _random, on_retry: Callable[[Request], object] | None = None,
           ) -> Iterator[Event]:
    """Yield the SSE events at ``url`` (any server), reconnecting with ``Last-Event-ID`` until the end event.

    A dropped connection (EOF before the end event, a read error, a 5xx, 408
    or 429) is resumed after the stream's ``retry`` with ``Backoff``; a 204
    ends the stream, as do ``end_events`` (yielded, last).  ``client`` is
    used as given (else one of our own, following redirects); ``on_retry``
    is called with each request that follows attempts that brought nothing
    new (``Request.after`` says what the last did), before its wait, so a
    user can be told it is still trying; ``sleep`` and ``random`` are for
    tests.  Raises ``StreamRefused`` on a 4xx,
    ``AttemptsExhausted`` after ``max_attempts`` connections in a row
    without a new event, ``ProtocolError`` if the answer is no event stream
    (or is compressed: it asks for ``Accept-Encoding: identity`` and
    inflates nothing), and ValueError for bad arguments (at the call, not
    at the first event).
    """
    state = Reconnect(url, headers=headers, last_event_id=last_event_id, max_attempts=max_attempts,
                      backoff=backoff, end_events=end_events, random=random)
    _sendable(url)
    own: AbstractContextManager[httpx.Client] = (
        nullcontext(client) if client is not None else httpx.Client(follow_redirects=True))
    return _run(state, own, timeout, sleep, on_retry)


def aevents(url: str, *, headers: Mapping[str, str] | None = None, last_event_id: str | None = None,
            max_attempts: int = DEFAULT_MAX_ATTEMPTS, backoff: Backoff | None = None,
            timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT, client: httpx.AsyncClient | None = None,
            end_events: Collection[str] = END_EVENTS, sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
            random: Callable[[], float] = _random, on_retry: Callable[[Request], object] | None = None,
            ) -> AsyncIterator[Event]:
    """``events`` over ``httpx.AsyncClient``: the same arguments, decisions and errors, as an async iterator
    (close it with ``contextlib.aclosing`` if you stop early)."""
    state = Reconnect(url, headers=headers, last_event_id=last_event_id, max_attempts=max_attempts,
                      backoff=backoff, end_events=end_events, random=random)
    _sendable(url)
    own: AbstractAsyncContextManager[httpx.AsyncClient] = (
        nullcontext(client) if client is not None else httpx.AsyncClient(follow_redirects=True))
    return _arun(state, own, timeout, sleep, on_retry)


def _run(state: Reconnect, own: AbstractContextManager[httpx.Client], timeout: float | httpx.Timeout | None,
         sleep: Callable[[float], object], on_retry: Callable[[Request], object] | None) -> Iterator[Event]:
    with own as http:
        while (request := _next(state, on_retry)) is not None:
            if request.wait_s:
                sleep(request.wait_s)
            try:
                with http.stream("GET", request.url, headers=_encoded(request), timeout=timeout) as response:
                    if response.status_code != 200:
                        _answered(state, response, _head(_raw(response)))
                        continue
                    _opened(state, response)
                    for chunk in _raw(response):
                        yield from state.feed(chunk)
                        if state.ended:
                            break
                    else:
                        state.dropped(CLOSED)
            except httpx.TransportError as exc:
                state.dropped(describe(exc, request.url))


async def _arun(state: Reconnect, own: AbstractAsyncContextManager[httpx.AsyncClient],
                timeout: float | httpx.Timeout | None, sleep: Callable[[float], Awaitable[object]],
                on_retry: Callable[[Request], object] | None) -> AsyncIterator[Event]:
    async with own as http:
        while (request := _next(state, on_retry)) is not None:
            if request.wait_s:
                await sleep(request.wait_s)
            try:
                async with http.stream("GET", request.url, headers=_encoded(request), timeout=timeout) as response:
                    if response.status_code != 200:
                        _answered(state, response, await _ahead(_araw(response)))
                        continue
                    _opened(state, response)
                    async for chunk in _araw(response):
                        for event in state.feed(chunk):
                            yield event
                        if state.ended:
                            break
                    else:
                        state.dropped(CLOSED)
            except httpx.TransportError as exc:
                state.dropped(describe(exc, request.url))


def _next(state: Reconnect, on_retry: Callable[[Request], object] | None) -> Request | None:
    """The state's next request, told to ``on_retry`` first when it follows attempts that brought nothing."""
    request = state.request()
    if request is not None and request.attempt > 1 and on_retry is not None:
        on_retry(request)
    return request


def _encoded(request: Request) -> list[tuple[bytes, bytes]]:
    """The headers as UTF-8 (an event id may be any text; httpx would take a str for ASCII only), with
    ``ACCEPT_ENCODING`` first unless the caller sent one."""
    given = [(name.encode(), value.encode()) for name, value in request.headers]
    asked = any(name.lower() == b"accept-encoding" for name, _ in given)
    return given if asked else [ACCEPT_ENCODING, *given]


def _opened(state: Reconnect, response: httpx.Response) -> None:
    state.opened(response.headers.get("content-type", ""), response.headers.get("content-encoding", ""))


def _answered(state: Reconnect, response: httpx.Response, body: bytes) -> None:
    state.answered(response.status_code, response.reason_phrase, response.headers.get("retry-after"), body,
                   response.headers.get("content-encoding", ""))


def _raw(response: httpx.Response) -> Iterator[bytes]:
    """The body as sent, never inflated (one already read, as ``httpx.MockTransport``'s is, as it was read)."""
    if response.is_stream_consumed:
        yield response.content
    else:
        yield from response.iter_raw()


async def _araw(response: httpx.Response) -> AsyncIterator[bytes]:
    """``_raw`` of an async response."""
    if response.is_stream_consumed:
        yield response.content
    else:
        async for chunk in response.aiter_raw():
            yield chunk


def _head(chunks: Iterator[bytes]) -> bytes:
    body = b""
    for chunk in chunks:
        body += chunk
        if len(body) >= MAX_ERROR_BODY:
            break
    return body[:MAX_ERROR_BODY]


async def _ahead(chunks: AsyncIterator[bytes]) -> bytes:
    body = b""
    async for chunk in chunks:
        body += chunk
        if len(body) >= MAX_ERROR_BODY:
            break
    return body[:MAX_ERROR_BODY]


def _sendable(url: str) -> None:
    """Raise ValueError unless httpx can send ``url`` (``Reconnect`` checks it with urllib, which takes more)."""
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"url must be an http:// or https:// URL, got {redact_url(url)!r} "
                         f"({scrub(str(exc), url)})") from None


def describe(exc: httpx.TransportError, url: str) -> str:
    """A transport error in a few words: its kind and httpx's message, without ``url``'s password."""
    text = scrub(str(exc), url) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text
