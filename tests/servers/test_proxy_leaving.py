"""Each dialect keeps its promise about a reader who leaves, through ``TokenStreams(Upstream(...))`` (what
``tokenwire proxy`` serves), on the memory log and on Redis, and across two instances sharing one Redis:

- a streamed chat completion stops its model once no reader is attached anywhere, as OpenAI's does: the
  upstream's request is closed (the stand-in sees its client leave), and only a few tokens are relayed for
  nobody in between, where today's proxy relayed the rest of the answer;
- ``/chat`` and a background response run to their end, as the AI SDK's resume and OpenAI's background mode
  expect, even under an app whose own routes cancel (``on_disconnect="cancel"``), which ``/streams`` still does.

The upstream is ``support.misbehaving_upstream`` (a token each 5 ms, ``endless`` or ``count=N``); the apps run in
this process under uvicorn in threads; the readers are plain sockets that read a few events, then hang up.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
import redis
from httpx_sse import connect_sse
from support.asgi_thread import in_thread
from support.live import wait_until
from support.misbehaving_upstream import CAP, MisbehavingUpstream, Served
from support.redis import RedisServer, stream_keys

from tokenwire.asgi import TokenStreams
from tokenwire.redislog.presence import readers_key
from tokenwire.upstream import Upstream, UpstreamConfig

# What a reader reads before it leaves.
READ = 10
# The most tokens the upstream may send after the reader left before it sees the proxy close its request: what
# the sockets and one model step hold, with room for a loaded machine (half a second at the stand-in's
# 200 tokens/s); a proxy that relays for nobody sends all CAP.
AFTER_LEFT = 100
# A finite answer, long enough that a reader leaving after READ tokens leaves well before it ends.
ANSWER = 300
TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def upstream() -> Iterator[MisbehavingUpstream]:
    with MisbehavingUpstream() as one:
        yield one


@pytest.fixture(params=["memory", "redis"])
def log(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory"
    redis: RedisServer = request.getfixturevalue("redis_server")
    return redis.url


def app(upstream: MisbehavingUpstream, log: str, model: str | None = None, **options: Any) -> TokenStreams:
    return TokenStreams(Upstream(UpstreamConfig(upstream.url, model=model)), log=log, **options)


def read_then_leave(client: httpx.Client, method: str, url: str, body: Any = None, count: int = READ) -> list[Any]:
    """Read ``count`` events with data from ``url``, then hang up; returns their data, as JSON where it is."""
    got: list[Any] = []
    with connect_sse(client, method, url, json=body) as source:
        assert source.response.status_code == 200, source.response.read()
        for event in source.iter_sse():
            if event.data and event.data != "[DONE]":
                got.append(json.loads(event.data) if event.data.startswith("{") else event.data)
            if len(got) >= count:
                break
    return got


def served_one(upstream: MisbehavingUpstream, before: int) -> Served:
    wait_until(lambda: len(upstream.served) > before, "the upstream to be asked")
    return upstream.served[before]


def ended(served: Served) -> Served:
    wait_until(lambda: served.left.is_set() or served.finished.is_set(),
               lambda: f"the upstream's answer to end or its client to leave ({served.sent} sent)", TIMEOUT_S)
    return served


def completion(base: str) -> tuple[str, dict[str, Any]]:
    return base + "/v1/chat/completions", {"model": "endless", "messages": [{"role": "user", "content": "x"}],
                                          "stream": True}


def test_a_chat_completion_whose_reader_left_stops_its_upstream_request(upstream: MisbehavingUpstream,
                                                                       log: str) -> None:
    before = len(upstream.served)
    with in_thread(app(upstream, log)) as base, httpx.Client(timeout=TIMEOUT_S) as client:
        chunks = read_then_leave(client, "POST", *completion(base))
        served = ended(served_one(upstream, before))
    assert served.left.is_set(), f"the upstream sent its whole answer ({served.sent}) for nobody"
    assert served.sent_when_left is not None and served.sent_when_left - len(chunks) < AFTER_LEFT, \
        f"{served.sent_when_left - len(chunks)} tokens sent after the reader left"


def test_a_chat_completion_read_on_another_instance_stops_when_its_last_reader_leaves(
        upstream: MisbehavingUpstream, redis_server: RedisServer) -> None:
    """On Redis: the first reader leaves while another, on the other instance, reads on: the model goes on; that one
    leaves too: the owner learns no reader is attached anywhere and stops it."""
    before = len(upstream.served)
    with ExitStack() as stack:
        one = stack.enter_context(in_thread(app(upstream, redis_server.url)))
        following = app(upstream, redis_server.url)
        other = stack.enter_context(in_thread(following))
        client = stack.enter_context(httpx.Client(timeout=TIMEOUT_S))
        url, body = completion(one)
        with connect_sse(client, "POST", url, json=body) as first:
            events = first.iter_sse()
            stream_id = json.loads(next(events).data)["id"].removeprefix("chatcmpl-")
            served = served_one(upstream, before)
            with connect_sse(client, "GET", f"{other}/streams/{stream_id}/events") as second:
                tokens = (event for event in second.iter_sse() if event.event == "token")
                next(tokens)
                # Both processes' presence is in the log before the first reader leaves (the follower's is a
                # call of its writer's next round, which a token read on its reader's connection can outrun).
                readers = readers_key(stream_keys(redis_server.url, stream_id)[0])
                with redis.Redis.from_url(redis_server.url) as plain:
                    wait_until(lambda: plain.zcard(readers) == 2, "a presence entry for each instance")
                first.response.close()                      # the reader on `one` leaves
                left_at = served.sent
                for _ in range(AFTER_LEFT + READ):          # the model goes on for the reader on `other`
                    next(tokens)
                assert not served.left.is_set() and served.sent > left_at
        ended(served)
        # The follower on `other` reads the ending in the log before the servers stop (none is cut by a shutdown).
        wait_until(lambda: following.driver is not None and following.driver.running == 0, "the follower to end")
    assert served.left.is_set(), f"the upstream sent its whole answer ({served.sent}) for nobody"


@pytest.mark.parametrize("route", ["chat", "background response"])
def test_a_chat_and_a_background_response_run_to_their_end(upstream: MisbehavingUpstream, log: str,
                                                          route: str) -> None:
    before = len(upstream.served)
    with (in_thread(app(upstream, log, model=f"count={ANSWER}", on_disconnect="cancel")) as base,
          httpx.Client(timeout=TIMEOUT_S) as client):
        if route == "chat":
            body = {"id": "c1", "trigger": "submit-message",
                    "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "x"}]}]}
            read_then_leave(client, "POST", base + "/chat", body)
        else:
            body = {"model": "any", "input": "x", "background": True, "stream": True}
            read_then_leave(client, "POST", base + "/v1/responses", body)
        served = ended(served_one(upstream, before))
    assert (served.left.is_set(), served.sent) == (False, ANSWER)


def test_tokenwires_own_routes_keep_the_apps_setting(upstream: MisbehavingUpstream) -> None:
    """``on_disconnect="cancel"``: ``GET /stream``'s reader leaving stops the model, as before."""
    before = len(upstream.served)
    with (in_thread(app(upstream, "memory", model="endless", on_disconnect="cancel")) as base,
          httpx.Client(timeout=TIMEOUT_S) as client):
        read_then_leave(client, "GET", base + "/stream")
        served = ended(served_one(upstream, before))
    assert served.left.is_set() and served.sent < CAP
