"""A factory's ValueError is a 400 with its message, whatever the factory's shape: a function
returning a list or an async iterable, a generator function, an async generator function (its checks run at its
first step), an async function returning an async generator.  The model's first step runs before the create is
answered; its first token is then neither lost nor generated twice, and a model still thinking gets a 201.

The app runs in this process (httpx's ASGI transport inside the app's lifespan), so each model's steps can be
counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from tokenwire.asgi import StreamRequest, TokenStreams

STEPS: list[int] = []          # every token index a model computed, in order


def _words(request: StreamRequest) -> list[str]:
    n = request.params.get("n", "3")
    if not n.isdigit():
        raise ValueError(f"n must be a number, got {n!r}")
    return [f" w{i}" for i in range(int(n))]


def returns_list(request: StreamRequest) -> list[str]:
    return _words(request)


def generator(request: StreamRequest) -> Iterator[str]:
    for i, word in enumerate(_words(request)):
        STEPS.append(i)
        yield word


async def async_generator(request: StreamRequest) -> AsyncIterator[str]:
    for i, word in enumerate(_words(request)):        # its check runs at its first step, not when it is called
        STEPS.append(i)
        yield word
        await asyncio.sleep(0)


async def returns_async_generator(request: StreamRequest) -> AsyncIterator[str]:
    await asyncio.sleep(0)                            # an async factory, as an async client's call is
    return async_generator(request)


class Upstream:
    """An async iterable (not a generator), as an SDK's stream object is."""

    def __init__(self, words: list[str]) -> None:
        self.words = iter(words)

    def __aiter__(self) -> Upstream:
        return self

    async def __anext__(self) -> str:
        await asyncio.sleep(0)
        try:
            return next(self.words)
        except StopIteration:
            raise StopAsyncIteration from None


def returns_async_iterable(request: StreamRequest) -> Upstream:
    return Upstream(_words(request))


SHAPES: list[Callable[[StreamRequest], Any]] = [returns_list, generator, async_generator, returns_async_generator,
                                                returns_async_iterable]


async def _ask(factory: Callable[[StreamRequest], Any], *queries: str) -> list[httpx.Response]:
    streams = TokenStreams(factory)
    transport = httpx.ASGITransport(app=streams)
    answers = []
    async with streams.lifespan(), httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for query in queries:
            made = await client.post(f"/streams?{query}")
            answers.append(made)
            if made.status_code == 201:
                answers.append(await client.get(made.json()["events_url"]))
    return answers


def _tokens(read: httpx.Response) -> list[str]:
    return [line[len("data: "):] for line in read.text.splitlines()
            if line.startswith("data: ") and not line.startswith("data: {")]


@pytest.mark.parametrize("factory", SHAPES, ids=lambda f: f.__name__)
def test_a_factory_refusing_its_request_is_a_400_with_its_message_whatever_its_shape(factory: Any) -> None:
    STEPS.clear()
    refused, made, read = asyncio.run(_ask(factory, "n=many", "n=3"))
    assert (refused.status_code, refused.json()) == (400, {"error": "n must be a number, got 'many'"})
    assert made.status_code == 201 and read.status_code == 200
    assert _tokens(read) == [" w0", " w1", " w2"] and "event: done" in read.text
    assert STEPS in ([], [0, 1, 2])         # each token computed once: the first one, taken early, is not lost


def test_the_first_step_runs_before_the_create_is_answered_and_its_token_is_logged_once() -> None:
    STEPS.clear()
    made, read = asyncio.run(_ask(async_generator, "n=4"))
    assert made.status_code == 201 and _tokens(read) == [" w0", " w1", " w2", " w3"]
    assert STEPS == [0, 1, 2, 3]
    frames = [frame.splitlines() for frame in read.text.split("\n\n") if "event: token" in frame]
    assert [line for frame in frames for line in frame if line.startswith("id: ")] == [f"id: {i}" for i in range(4)]


async def thinking(request: StreamRequest) -> AsyncIterator[str]:
    """Checks its request, then thinks (waits) before its first token, and may fail after that wait."""
    if request.params.get("mode") not in ("ok", "late"):
        raise ValueError(f"mode must be ok or late, got {request.params.get('mode')!r}")
    await asyncio.sleep(0.01)
    if request.params["mode"] == "late":
        raise ValueError("refused after thinking")
    yield " answer"


def test_a_model_still_thinking_is_made_at_once_and_what_it_raises_after_waiting_is_failed() -> None:
    refused, made, read, late, failed = asyncio.run(_ask(thinking, "mode=x", "mode=ok", "mode=late"))
    assert (refused.status_code, refused.json()) == (400, {"error": "mode must be ok or late, got 'x'"})
    assert made.status_code == 201 and _tokens(read) == [" answer"]
    assert late.status_code == 201
    assert 'event: failed\ndata: {"error": "the model raised ValueError", "tokens": 0}' in failed.text


async def broken(request: StreamRequest) -> AsyncIterator[str]:
    raise RuntimeError("a bug with a secret")
    yield ""                                          # unreachable: an async generator function


def test_any_other_error_before_the_first_token_or_wait_is_a_500_naming_its_type() -> None:
    (answer,) = asyncio.run(_ask(broken, "n=1"))
    assert (answer.status_code, answer.json()) == (500, {"error": "the model factory raised RuntimeError"})


def test_a_str_is_not_taken_for_tokens() -> None:
    (answer,) = asyncio.run(_ask(lambda request: "hello", "n=1"))
    assert (answer.status_code, answer.json()) == (500, {"error": "the model factory raised TypeError"})
