"""A failing log never spins: every retry backs off, says why at most every 10 s, and recovers by itself.

A real ``tokenwire serve`` process on a real Redis of the test's own (its AOF synced at every write, so that
a Redis killed with SIGKILL and started again has every stream).  Under a background response, a stream
being read and a chat being read, Redis is killed: over the next seconds the server's CPU time (the
kernel's count for the process, every thread) stays under a tenth of the wall time, it says a bounded
number of lines, and once Redis is back the background response runs to its end, the stream resumes to
its ``done`` and a new chat completes.  Then a Redis that refuses a command the log needs (``XSETID``,
denied by ``ACL SETUSER`` while the server runs): the background response's retries stay a few a second
(Redis's own count of commands), and it completes once the command is allowed again.  The unit half:
``Backoff``'s waits and ``Said``'s one line per cause.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.live import wait_until
from support.redis import RedisServer, redis_command, require_redis, until_logged
from support.tokenwire_process import Tokenwire, running_tokenwire

from tokenwire.core.retry import RETRY_FIRST_S, RETRY_MAX_S, SAY_EVERY_S, Backoff, Said

TIMEOUT_S = 20.0
# How long the server is watched while its log fails: long enough for many retries of a loop that spins
# (a spin is thousands a second) and for a backoff to reach its cap.
WINDOW_S = 3.0
# The share of one core the server may use meanwhile; a spinning retry takes ~100%.
MAX_CPU_SHARE = 0.10
# The lines the server may say meanwhile: a cause said once per 10 s, whatever the number of retries.
MAX_LINES = 6
# Commands a second Redis may get from the server while it refuses XSETID; a spin sent ~30,000.
MAX_COMMANDS_PER_S = 100
# How long recovery may take once Redis is back: the retries wait at most RETRY_MAX_S.
RECOVERY_S = 15.0
# The canned answer's pace here: 277 tokens in ~5.5 s, so each is mid-answer when Redis goes.
PACE = {"tokens": 277, "producer_ms": 20}


# -- the unit ------------------------------------------------------------------------------------------
def test_a_backoff_doubles_up_to_its_cap_and_starts_over_after_a_success() -> None:
    backoff = Backoff()
    waits = [backoff.failed() for _ in range(8)]
    assert waits == [min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** n) for n in range(8)]
    assert waits[-1] == RETRY_MAX_S
    backoff.succeeded()
    assert backoff.failed() == RETRY_FIRST_S


def test_a_backoff_refuses_a_first_wait_past_its_cap() -> None:
    with pytest.raises(ValueError, match=r"^a backoff needs 0 < first_s <= max_s, got 3.0 and 2.0$"):
        Backoff(first_s=3.0, max_s=2.0)


def test_a_cause_is_said_once_per_period_and_each_cause_for_itself() -> None:
    said = Said()
    assert [said.due("down", t) for t in (0.0, 1.0, SAY_EVERY_S - 0.1, SAY_EVERY_S)] == [True, False, False, True]
    assert said.due("NOPERM", 1.0)


# -- the server, as a process ----------------------------------------------------------------------------
@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis whose every write is on disk before it answers: killed and started again, it has it all."""
    server = RedisServer(require_redis(), args=("--appendonly", "yes", "--appendfsync", "always",
                                                "--dir", str(tmp_path)))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _kill(redis: RedisServer) -> None:
    proc, redis.proc = redis.proc, None
    assert proc is not None
    proc.kill()
    proc.wait(TIMEOUT_S)


def _background(client: httpx.Client) -> str:
    made = client.post("/v1/responses", json={"model": "m", "input": "hi", "background": True, **PACE})
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


def _completed(client: httpx.Client, response_id: str) -> bool:
    record = client.get(f"/v1/responses/{response_id}")
    return record.status_code == 200 and record.json()["status"] == "completed"


def _read(client: httpx.Client, method: str, target: str, into: list[str], **kwargs: object) -> threading.Thread:
    """A thread reading ``target``'s body into ``into`` until its connection ends (however it ends)."""
    def read() -> None:
        try:
            with client.stream(method, target, **kwargs) as body:        # type: ignore[arg-type]
                for text in body.iter_text():
                    into.append(text)
        except httpx.HTTPError:
            into.append("\n(dropped)")
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _watched(server: Tokenwire, window_s: float) -> tuple[float, int]:
    """The server's CPU share and the lines it said over ``window_s`` of wall time from now."""
    cpu, lines, started = server.cpu_s(), server.lines(), time.monotonic()
    time.sleep(window_s)                      # the window itself: what is measured is the ratio over it
    return (server.cpu_s() - cpu) / (time.monotonic() - started), server.lines() - lines


def test_redis_killed_under_a_background_response_a_stream_and_a_chat(durable_redis: RedisServer) -> None:
    with (running_tokenwire(["serve", "--port", "0", "--log", durable_redis.url]) as server,
          httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as client):
        response_id = _background(client)
        stream_id = client.post("/streams", params=PACE).json()["stream_id"]
        stream_body: list[str] = []
        chat_body: list[str] = []
        readers = [_read(client, "GET", f"/streams/{stream_id}/events", stream_body),
                   _read(client, "POST", "/chat", chat_body, json={"messages": [], **PACE})]
        until_logged(durable_redis.url, response_id.removeprefix("resp_"), 20)
        wait_until(lambda: chat_body and stream_body and "event: token" in "".join(stream_body), "both read")
        _kill(durable_redis)
        share, lines = _watched(server, WINDOW_S)
        said = server.output()
        assert share < MAX_CPU_SHARE, (share, said)
        assert lines <= MAX_LINES, said
        durable_redis.start()
        for reader in readers:
            reader.join(TIMEOUT_S)
        wait_until(lambda: _completed(client, response_id), "the background response completed", RECOVERY_S)
        last = max(int(i) for i in re.findall(r"^id: (\d+)$", "".join(stream_body), re.MULTILINE))
        resumed = client.get(f"/streams/{stream_id}/events", headers={"Last-Event-ID": str(last)})
        chat = client.post("/chat", json={"messages": [], "tokens": 5, "producer_ms": 1})
    assert "event: done" not in "".join(stream_body)            # Redis went mid-stream: it ended without done
    assert resumed.status_code == 200, resumed.text
    assert "event: done" in resumed.text and f"id: {last + 1}\n" in resumed.text, resumed.text
    assert chat.status_code == 200 and chat.text.rstrip().endswith("data: [DONE]"), chat.text


def test_a_redis_refusing_xsetid_is_asked_a_few_times_a_second_not_in_a_loop(own_redis: RedisServer) -> None:
    with (running_tokenwire(["serve", "--port", "0", "--log", own_redis.url]) as server,
          httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as client):
        redis_command(own_redis.url, "ACL", "SETUSER", "default", "-xsetid")
        response_id = _background(client)
        before = int(redis_command(own_redis.url, "INFO", "stats")["total_commands_processed"])  # type: ignore[index]
        share, lines = _watched(server, WINDOW_S)
        after = int(redis_command(own_redis.url, "INFO", "stats")["total_commands_processed"])   # type: ignore[index]
        said = server.output()
        assert (after - before) / WINDOW_S < MAX_COMMANDS_PER_S, (after - before, said)
        assert share < MAX_CPU_SHARE and lines <= MAX_LINES, (share, said)
        told = [line for line in said.splitlines() if "read to its end inside the server" in line]
        assert len(told) == 1 and "can't run this command" in told[0], said     # its cause, said once
        redis_command(own_redis.url, "ACL", "SETUSER", "default", "+xsetid")
        wait_until(lambda: _completed(client, response_id), "the background response completed", RECOVERY_S)
