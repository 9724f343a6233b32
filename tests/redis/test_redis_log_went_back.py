"""A log that went back past what was sent is not continued over the gap: the stream ends as lost.

What a failover to a lagging replica does, made on one real Redis: a ``tokenwire serve`` generates a
stream; its keys are saved (``DUMP``) when the log holds a dozen tokens; a reader goes on to token 39; the
server stops, and the keys are put back as saved (``RESTORE``): the log now ends before what the reader was
sent, and the stream still says it generates.  Another server, asked to resume after token 39, answers 410
with the lost stream's message (it said 400 "was never sent", and once a process had generated from the
log's end again, spliced another answer onto the reader's); the stream is lost for every reader after
that, and nothing generates it again.  So do a chat's resume past the chunks the log gives, and a
response's past its events.  On the memory log, which never goes back, such a cursor is still a 400.
"""

from __future__ import annotations

import json
import re

import httpx
import redis
from support.live import wait_until
from support.redis import RedisServer, admin, stream_keys
from support.tokenwire_process import running_tokenwire

from tokenwire.core.tokenlog import StreamLost

TIMEOUT_S = 20.0


def _read_until(client: httpx.Client, target: str, last: int, **headers: str) -> list[int]:
    """Read ``target``'s token ids until ``last``, then hang up."""
    ids: list[int] = []
    with client.stream("GET", target, headers=headers) as reading:
        for line in reading.iter_lines():
            if line.startswith("id: "):
                ids.append(int(line[4:]))
            if ids and ids[-1] >= last and line.startswith("data: "):
                break
    return ids


def _went_back(own_redis: RedisServer) -> tuple[str, int]:
    """A stream whose log ends before the last token its reader was sent; returns its id and that token."""
    raw = redis.Redis.from_url(admin(own_redis.url))
    with running_tokenwire(["serve", "--port", "0", "--log", own_redis.url]) as one, \
            httpx.Client(base_url=one.url, timeout=TIMEOUT_S) as client:
        stream_id = client.post("/streams", params={"tokens": 277, "producer_ms": 20}).json()["stream_id"]
        keys = stream_keys(own_redis.url, stream_id)
        first = _read_until(client, f"/streams/{stream_id}/events", 9)
        at_once = raw.pipeline(transaction=True)            # MULTI: no token appended between the three
        *dumps, held = at_once.dump(keys[0]).dump(keys[1]).xlen(keys[1]).execute()
        saved = dict(zip(keys[:2], dumps, strict=True))                             # what a lagging replica holds
        rest = _read_until(client, f"/streams/{stream_id}/events", 39, **{"Last-Event-ID": "9"})
    assert first + rest == list(range(40)) and held < 40, (held, first, rest)
    raw.delete(*keys)
    for key, value in saved.items():
        raw.restore(key, 600_000, value)
    assert int(raw.xlen(keys[1])) == held and raw.hget(keys[0], "state") == b"generating"
    return stream_id, 39


def test_a_resume_past_the_log_end_of_an_open_stream_ends_it_as_lost(own_redis: RedisServer) -> None:
    stream_id, last = _went_back(own_redis)
    tokens_key = stream_keys(own_redis.url, stream_id)[1]
    raw = redis.Redis.from_url(admin(own_redis.url))
    held = int(raw.xlen(tokens_key))
    with running_tokenwire(["serve", "--port", "0", "--log", own_redis.url]) as two, \
            httpx.Client(base_url=two.url, timeout=TIMEOUT_S) as client:
        resumed = client.get(f"/streams/{stream_id}/events", headers={"Last-Event-ID": str(last)})
        earlier = client.get(f"/streams/{stream_id}/events", headers={"Last-Event-ID": "3"})
        again = client.get(f"/streams/{stream_id}/events")
    lost = {"error": str(StreamLost(stream_id))}
    assert (resumed.status_code, resumed.json()) == (410, lost), resumed.text
    assert (earlier.status_code, earlier.json()) == (410, lost), earlier.text     # lost for every reader now
    assert (again.status_code, again.json()) == (410, lost), again.text
    assert int(raw.xlen(tokens_key)) == held                                      # nothing generated it again


def test_an_owner_still_generating_when_its_stream_is_lost_ends_its_readers_with_the_lost_ending(
        own_redis: RedisServer) -> None:
    with running_tokenwire(["serve", "--port", "0", "--log", own_redis.url]) as one, \
            httpx.Client(base_url=one.url, timeout=TIMEOUT_S) as client:
        stream_id = client.post("/streams", params={"tokens": 277, "producer_ms": 20}).json()["stream_id"]
        with client.stream("GET", f"/streams/{stream_id}/events") as reading:
            lines = reading.iter_lines()
            wait_until(lambda: next(lines) == "event: token", "the owner's first token read")
            far = client.get(f"/streams/{stream_id}/events", headers={"Last-Event-ID": "250"})  # ahead of the log
            rest = "\n".join(lines)
    assert far.status_code == 410, far.text
    tokens = [int(i) for i in re.findall(r"^id: (\d+)\nevent: token$", rest, re.MULTILINE)]   # after token 0
    done, _, data = rest.rstrip().rpartition("\n")
    ending = json.loads(data.removeprefix("data: "))             # what it was sent, in order, then the lost ending
    assert done.endswith("event: done") and tokens == list(range(1, len(tokens) + 1)), rest
    assert ending == {"tokens": len(tokens) + 1, "delivered_from": 0, "dropped": 0, "stopped_early": True,
                      "reason": "lost"}, rest


def test_on_the_memory_log_a_cursor_never_sent_is_still_a_400() -> None:
    with running_tokenwire(["serve", "--port", "0"]) as one, httpx.Client(base_url=one.url, timeout=TIMEOUT_S) as c:
        stream_id = c.post("/streams", params={"tokens": 277, "producer_ms": 50}).json()["stream_id"]
        far = c.get(f"/streams/{stream_id}/events", headers={"Last-Event-ID": "250"})
    assert far.status_code == 400 and "'250' was never sent" in far.json()["error"], far.text


def test_a_chat_resumed_past_the_chunks_of_an_open_stream_ends_it_as_lost(own_redis: RedisServer) -> None:
    """The same rule on ``/chat/<id>/stream``: a ``Last-Event-ID`` past the chunks a shared log gives a chat
    still generating is the lost stream's 410 (it said 400 "past the end"), and the stream is lost for every
    reader after that; the owner's reader ends rather than reading on past the gap."""
    body = {"id": "went-back-chat", "messages": [], "tokens": 277, "producer_ms": 20}
    with running_tokenwire(["serve", "--port", "0", "--log", own_redis.url]) as one, \
            httpx.Client(base_url=one.url, timeout=TIMEOUT_S) as client:
        with client.stream("POST", "/chat", json=body) as chat:
            lines = chat.iter_lines()
            wait_until(lambda: '"text-delta"' in next(lines), "the chat's first text chunk read")
            far = client.get("/chat/went-back-chat/stream", headers={"Last-Event-ID": "5000"})
            rest = "\n".join(lines)
        again = client.get("/chat/went-back-chat/stream", params={"startIndex": 0})
    assert far.status_code == 410 and "lost" in far.text, far.text
    assert again.status_code == 410 and "lost" in again.text, again.text              # lost for every reader now
    assert rest.count('"text-delta"') < 276 and not rest.rstrip().endswith('"finish"}'), rest[-400:]


def test_a_response_resumed_past_its_events_while_it_generates_ends_it_as_lost(own_redis: RedisServer) -> None:
    """And on ``GET /v1/responses/<id>?stream=true&starting_after=N``: past the events a shared log gives a
    background response still in progress is the lost stream's 410, in OpenAI's error format; the memory
    log's answer to the same is still the 400."""
    body = {"model": "m", "input": "hi", "background": True, "tokens": 277, "producer_ms": 20}
    with running_tokenwire(["serve", "--port", "0", "--log", own_redis.url]) as one, \
            httpx.Client(base_url=one.url, timeout=TIMEOUT_S) as client:
        response_id = client.post("/v1/responses", json=body).json()["id"]
        wait_until(lambda: client.get(f"/v1/responses/{response_id}").json()["output"], "the response's first token")
        far = client.get(f"/v1/responses/{response_id}", params={"stream": "true", "starting_after": 5000})
        again = client.get(f"/v1/responses/{response_id}", params={"stream": "true", "starting_after": 0})
        record = client.get(f"/v1/responses/{response_id}")
    assert far.status_code == 410 and "lost" in far.json()["error"]["message"], far.text
    assert again.status_code == 410, again.text
    assert record.status_code == 410, record.text
    with running_tokenwire(["serve", "--port", "0"]) as two, httpx.Client(base_url=two.url, timeout=TIMEOUT_S) as c:
        response_id = c.post("/v1/responses", json=body).json()["id"]
        memory = c.get(f"/v1/responses/{response_id}", params={"stream": "true", "starting_after": 5000})
    assert memory.status_code == 400 and "starting_after 5000 is past the end" in memory.text, memory.text
