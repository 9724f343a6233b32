"""Continuation (``TokenStreams(model, takeover="continue")``) on a real redis-server and two uvicorn processes:
the owner is SIGKILLed mid-answer and the other process calls the factory again with exactly the logged prefix,
appending from there; the reader gets every index once, in order, to the exact text.
"""

from __future__ import annotations

import asyncio
import functools
import json
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.asgi import Read, read_stream, uvicorn
from support.redis import running_redis, until_logged

from tokenwire.asgi import StreamRequest, TokenStreams
from tokenwire.core.clock import RealClock
from tokenwire.core.tokenlog import StreamState
from tokenwire.redislog.streams import open_log

TEXT = "".join(f" t{i}" for i in range(60))


def _env(url: str, calls: Path) -> dict[str, str]:
    # A short lease, so that a dead owner is noticed within half a second.
    return {"TOKENWIRE_TEST_LOG": f"{url}?lease_ms=400&block_ms=50", "TOKENWIRE_TEST_CALLS": str(calls)}


def _calls(path: Path, stream_id: str) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [call for call in map(json.loads, lines) if call["stream_id"] == stream_id]


def test_a_reconnect_to_another_process_continues_the_model_from_the_logged_prefix(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    with running_redis() as redis_server:
        env = _env(redis_server.url, calls)
        with (uvicorn("support.apps.serverless:app", env=env) as one,
              uvicorn("support.apps.serverless:app", env=env) as other):
            made = httpx.post(f"{one.url}/continued/streams?n=60&delay_ms=30&hold_at=40").json()   # held at 40
            first = read_stream(one.url + made["events_url"], stop_after=10)
            until_logged(redis_server.url, made["stream_id"], 13)    # detached: the owner logs on meanwhile
            owner_pid = one.proc.pid if one.proc else 0
            one.stop(signal.SIGKILL)                         # then dies mid-answer
            rest = read_stream(other.url + made["events_url"], headers={"Last-Event-ID": first.tokens[-1].id},
                               timeout_s=20)
            other_pid = other.proc.pid if other.proc else 0
    assert first.ids + rest.ids == list(range(60))
    assert first.text + rest.text == TEXT
    assert rest.last.event == "done" and rest.last_json()["tokens"] == 60 and "stopped_early" not in rest.last_json()
    made_call, continued = _calls(calls, made["stream_id"])
    assert (made_call["pid"], made_call["start"], made_call["prefix"]) == (owner_pid, 0, [])
    start = continued["start"]
    assert continued["pid"] == other_pid and 13 <= start <= 40
    assert continued["prefix"] == [f" t{i}" for i in range(start)]          # exactly what was logged
    assert continued["params"] == {"n": "60", "delay_ms": "30", "hold_at": "40"}   # the same request


def test_a_reader_following_on_another_process_is_carried_on_without_a_reconnect(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    with running_redis() as redis_server:
        env = _env(redis_server.url, calls)
        with (uvicorn("support.apps.serverless:app", env=env) as one,
              uvicorn("support.apps.serverless:app", env=env) as other):
            # The owner holds before index 20 (hold_at): it is mid-answer when killed, however late this reader is.
            made = httpx.post(f"{one.url}/continued/streams?n=60&delay_ms=30&hold_at=20").json()
            with httpx.Client(timeout=20) as client, client.stream("GET", other.url + made["events_url"]) as got:
                body = b""
                for chunk in got.iter_bytes():
                    body += chunk
                    if body.count(b"event: token") >= 8 and one.proc is not None:
                        one.stop(signal.SIGKILL)          # the owner dies while this reader follows it here
                    if b"event: done" in body:
                        break
    ids = [int(line[4:]) for line in body.decode().splitlines() if line.startswith("id: ")]
    assert ids[:-1] == list(range(60)) and ids[-1] == 59              # one connection: each id once, then done
    assert body.count(b"event: open") == 1 and b"stopped_early" not in body
    starts = [c["start"] for c in _calls(calls, made["stream_id"])]
    assert len(starts) == 2 and starts[0] == 0 and 8 <= starts[1] <= 20, starts    # continued from the logged prefix


def test_without_continuation_the_other_process_still_ends_with_owner_lost(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    with running_redis() as redis_server:
        env = _env(redis_server.url, calls)
        with (uvicorn("support.apps.serverless:app", env=env) as one,
              uvicorn("support.apps.serverless:app", env=env) as other):
            made = httpx.post(f"{one.url}/ended/streams?n=200&delay_ms=20").json()
            first = read_stream(one.url + made["events_url"], stop_after=5)
            one.stop(signal.SIGKILL)
            rest = read_stream(other.url + made["events_url"], headers={"Last-Event-ID": first.tokens[-1].id},
                               timeout_s=20)
    assert rest.ids == list(range(5, 5 + len(rest.ids))) and 5 + len(rest.ids) < 200
    assert rest.last.event == "done" and rest.last_json()["reason"] == "owner lost"
    assert len(_calls(calls, made["stream_id"])) == 1                   # never called again


def test_a_stream_is_continued_only_by_a_model_of_the_same_name(tmp_path: Path, loop_kind: str) -> None:
    """Two apps with different models (both ``takeover="continue"``) on one Redis; the owner of
    a stream made by one dies, and a reader comes back through the other: the stream ends ``owner lost`` with
    the first model's tokens only, and the other model's factory is never called for it."""
    calls = tmp_path / "calls.jsonl"
    with running_redis() as redis_server:
        env = _env(redis_server.url, calls)
        with (uvicorn("support.apps.serverless:app", env=env) as one,
              uvicorn("support.apps.serverless:app", env=env) as other):
            made = httpx.post(f"{one.url}/continued/streams?n=60&delay_ms=30").json()
            meta = open_log(redis_server.url, RealClock().now).meta(made["stream_id"])
            first = read_stream(one.url + made["events_url"], stop_after=10)
            one.stop(signal.SIGKILL)
            through_another = "/another" + made["events_url"].removeprefix("/continued")
            rest = read_stream(other.url + through_another, headers={"Last-Event-ID": first.tokens[-1].id},
                               timeout_s=20)
    assert rest.status == 200 and rest.ids == list(range(10, 10 + len(rest.ids)))
    assert first.text + rest.text == TEXT[:len(f"{first.text}{rest.text}")] and " y" not in rest.text
    assert rest.last.event == "done" and rest.last_json()["reason"] == "owner lost"
    assert 10 + len(rest.ids) < 60 and rest.last_json()["tokens"] == 10 + len(rest.ids)
    assert [call["model"] for call in _calls(calls, made["stream_id"])] == ["model"]     # never called again
    assert (meta["model"], meta.get("name")) == ("asgi", "support.apps.serverless.model")       # what the log records


def test_a_model_is_named_by_its_qualified_name_or_the_name_given() -> None:
    async def factory(request: StreamRequest) -> Any:
        yield "x"

    class Factory:
        def __call__(self, request: StreamRequest) -> Any:
            return factory(request)

    here = "test_continuation.test_a_model_is_named_by_its_qualified_name_or_the_name_given.<locals>"
    assert TokenStreams(factory).models.name == f"{here}.factory"                          # type: ignore[union-attr]
    assert TokenStreams(functools.partial(factory)).models.name == f"{here}.factory"       # type: ignore[union-attr]
    assert TokenStreams(Factory()).models.name == f"{here}.Factory"                        # type: ignore[union-attr]
    assert TokenStreams(factory, name="gpt-x v2").models.name == "gpt-x v2"               # type: ignore[union-attr]
    with pytest.raises(ValueError, match="name must be a non-empty str naming the model, got ' '"):
        TokenStreams(factory, name=" ")
    with pytest.raises(TypeError, match="name must be a non-empty str naming the model, got 3"):
        TokenStreams(factory, name=3)  # type: ignore[arg-type]


def test_a_shutdown_hands_a_continuable_stream_off_to_another_process(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    with running_redis() as redis_server:
        env = {**_env(redis_server.url, calls), "TOKENWIRE_TEST_GRACE_S": "0.3"}
        with (uvicorn("support.apps.serverless:app", env=env) as one,
              uvicorn("support.apps.serverless:app", env=env) as other):
            made = httpx.post(f"{one.url}/continued/streams?n=60&delay_ms=30").json()
            cut: list[Read] = []
            reading = threading.Event()
            reader = threading.Thread(target=lambda: cut.append(read_stream(one.url + made["events_url"],
                                                                            first_token=reading)))
            reader.start()
            assert reading.wait(20), "the reader's first token"          # the deploy comes mid-answer
            assert one.proc is not None
            one.proc.send_signal(signal.SIGTERM)             # a deploy: the old process is told to exit
            reader.join(20)
            first = cut[0]
            rest = read_stream(other.url + made["events_url"], headers={"Last-Event-ID": first.tokens[-1].id},
                               timeout_s=20)
            other_pid = other.proc.pid if other.proc else 0
    assert first.events and first.last.event == "token"                 # ended without `done`: come back
    assert first.ids + rest.ids == list(range(60)) and first.text + rest.text == TEXT
    assert rest.last.event == "done" and "stopped_early" not in rest.last_json()
    made_call, continued = _calls(calls, made["stream_id"])
    assert continued["pid"] == other_pid and continued["prefix"] == [f" t{i}" for i in range(continued["start"])]


def test_the_request_carries_its_prefix_and_start() -> None:
    request = StreamRequest("s", {}, b"", "c", prefix=("a", " b"), start=2)
    assert "".join(request.prefix) == "a b" and request.start == 2
    assert StreamRequest("s", {}, b"", "c").prefix == () and StreamRequest("s", {}, b"", "c").start == 0
    with pytest.raises(ValueError, match=r"start must be len\(prefix\) \(1\), got 3"):
        StreamRequest("s", {}, b"", "c", prefix=("a",), start=3)


def test_takeover_is_end_or_continue() -> None:
    async def model(request: StreamRequest) -> Any:
        yield "x"

    with pytest.raises(ValueError, match="takeover must be 'end' or 'continue', got 'restart'"):
        TokenStreams(model, takeover="restart")
    with pytest.raises(ValueError, match="takeover must be 'end' or 'continue', got 'Continue'"):
        TokenStreams(takeover="Continue")
    assert TokenStreams(takeover="continue").models is None              # the canned answer continues anyway


def test_take_over_takes_only_a_free_lease_of_a_stream_still_generating() -> None:
    with running_redis() as redis_server:
        mine, theirs = (open_log(f"{redis_server.url}?lease_ms=5000", RealClock().now) for _ in range(2))

        async def scenario() -> list[tuple[str, bool]]:
            seen = []
            for state in ("generating", "cancelled", "done"):
                await mine.aio.create(state, {"model": "asgi"}, 100)
                await mine.aio.claim(state)
                seen.append((f"{state}, held", (await theirs.aio.take_over(state)).owned))
                await mine.aio.set_state(state, StreamState(state))
                await mine.aio.release(state)
                seen.append((f"{state}, free", (await theirs.aio.take_over(state)).owned))
                seen.append((f"{state}, state", (await theirs.aio.state(state)).value == state))
            await mine.aio.close()
            await theirs.aio.close()
            return seen

        seen = asyncio.run(scenario())
    assert seen == [("generating, held", False), ("generating, free", True), ("generating, state", True),
                    ("cancelled, held", False), ("cancelled, free", False), ("cancelled, state", True),
                    ("done, held", False), ("done, free", False), ("done, state", True)]


def test_a_continuation_whose_prefix_the_log_trimmed_ends_the_stream_never_a_reconnect_loop(tmp_path: Path) -> None:
    """``maxlen`` below the answer: the log keeps the last 20 tokens, so the prefix a continuation needs is not
    whole.  The reader gets what the log still holds after its cursor, then the early-stop ``done`` ("prefix
    trimmed"); the factory is not called again, and a reconnect gets that ending, not a 200 with nothing."""
    calls = tmp_path / "calls.jsonl"
    with running_redis() as redis_server:
        env = {**_env(redis_server.url, calls), "TOKENWIRE_TEST_LOG": f"{redis_server.url}?lease_ms=400&block_ms=50"
                                                                      f"&maxlen=20"}
        with (uvicorn("support.apps.serverless:app", env=env) as one,
              uvicorn("support.apps.serverless:app", env=env) as other):
            made = httpx.post(f"{one.url}/continued/streams?n=100&delay_ms=20").json()
            first = read_stream(one.url + made["events_url"], stop_after=40)    # 0.8 s: renewals trimmed it
            one.stop(signal.SIGKILL)
            rest = read_stream(other.url + made["events_url"], headers={"Last-Event-ID": first.tokens[-1].id},
                               timeout_s=20)
            again = read_stream(other.url + made["events_url"], headers={"Last-Event-ID": rest.last.id or "39"},
                                timeout_s=20)
    assert first.ids == list(range(40))
    ending = rest.last_json()
    assert rest.last.event == "done" and ending["stopped_early"] is True and ending["reason"] == "prefix trimmed"
    assert rest.ids == list(range(40, ending["tokens"])) and ending["tokens"] < 100
    assert first.text + rest.text == "".join(f" t{i}" for i in range(ending["tokens"]))
    assert again.status == 200 and not again.tokens and again.last.event == "done"
    assert again.last_json()["stopped_early"] is True
    assert [c["start"] for c in _calls(calls, made["stream_id"])] == [0]          # never called again
