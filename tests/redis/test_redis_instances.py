"""Several ``tokenwire serve`` processes sharing one Redis: resume, failover after SIGKILL, Redis restart.

Each instance is a real process (``python -m tokenwire serve --port 0 --log
redis://...``) with a short lease so that a takeover comes within a second.
The reader is a raw loopback socket fed to the project's own SSE decoder.
Which instance generated each index is read back from the Redis stream
(every entry records its owner), so "each index once, A's prefix then B's
rest" is checked on the log itself, not only at the reader.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import pytest

from tokenwire.core.model import ANSWER
from tokenwire.core.sse import Decoder

# A takeover waits for the dead owner's lease: short here so the test is quick.
LEASE_MS = 400
BLOCK_MS = 50
START_TIMEOUT_S = 15.0
IO_TIMEOUT_S = 10.0


class Instance:
    """One ``tokenwire serve`` process; ``name`` labels it in the log's owner ids."""

    def __init__(self, log_url: str, name: str, loop: str | None = None) -> None:
        self.name = name
        env = dict(os.environ)
        env.pop("TOKENWIRE_LOG_URL", None)
        if loop is not None:
            env["TOKENWIRE_LOOP"] = loop
        url = f"{log_url}?lease_ms={LEASE_MS}&block_ms={BLOCK_MS}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tokenwire", "serve", "--port", "0", "--quiet", "--log", url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.port = self._read_port()
        self.pid = self.proc.pid

    def _read_port(self) -> int:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        line = box[0] if box else ""
        if "serving on http://127.0.0.1:" not in line:
            self.kill()
            raise RuntimeError(f"instance {self.name} did not start: {line!r} {self.proc.stderr.read()!r}")
        return int(line.split("http://127.0.0.1:")[1].split("/")[0])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe:
                pipe.close()


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    ids: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    done: bool = False
    ending: dict = field(default_factory=dict)     # the done event's data

    def json(self) -> dict:
        return json.loads(self.body)


def request(port: int, method: str, path: str, *, last_event_id: int | None = None,
            stop_after: int | None = None, on_token=None) -> Reply:
    """One HTTP request on loopback; an event stream is decoded until ``done``, EOF or ``stop_after`` tokens."""
    extra = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Connection: close\r\n"
                     f"Content-Length: 0\r\n\r\n".encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        reply = Reply(int(lines[0].split()[1]),
                      {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])})
        if not reply.headers.get("content-type", "").startswith("text/event-stream"):
            while chunk := sock.recv(65536):
                rest += chunk
            reply.body = rest
            return reply
        decoder = Decoder()
        while True:
            for event in decoder.feed(rest):
                if event.event == "token":
                    reply.ids.append(int(event.id))
                    reply.texts.append(event.data)
                    if on_token:
                        on_token(reply)
                    if stop_after is not None and len(reply.ids) >= stop_after:
                        return reply
                elif event.event == "done":
                    reply.done, reply.ending = True, json.loads(event.data)
            try:
                rest = sock.recv(65536)
            except ConnectionResetError:
                break
            if not rest:
                break
    return reply


def create(inst: Instance, query: str) -> str:
    reply = request(inst.port, "POST", f"/streams?{query}")
    assert reply.status == 201, reply
    return reply.json()["events_url"]


def _log(url: str):
    from tokenwire.redislog.blocking import RedisTokenLog
    return RedisTokenLog(url, name="test")


def owners(url: str, stream_id: str, *instances: Instance) -> list[str]:
    """Who generated each index, in index order, from the Redis stream itself (owner ids are host:pid/...)."""
    entries = _log(url).entries(stream_id)
    assert [i for i, _, _ in entries] == list(range(len(entries)))        # every index once, none missing
    names = {str(inst.pid): inst.name for inst in instances}
    return [names.get(by.split("/")[0].rpartition(":")[2], by) for _, _, by in entries]


def runs(names: list[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for name in names:
        if out and out[-1][0] == name:
            out[-1] = (name, out[-1][1] + 1)
        else:
            out.append((name, 1))
    return out


@pytest.fixture(params=["asyncio", "uvloop"])
def pair(redis_server, request):
    a, b = Instance(redis_server.url, "A", request.param), Instance(redis_server.url, "B", request.param)
    try:
        yield redis_server.url, a, b
    finally:
        a.kill()
        b.kill()


def test_cut_on_a_resumed_on_b_gives_the_exact_answer(pair):
    url, a, b = pair
    n = 60
    events = create(a, f"tokens={n}&producer_ms=2&scenario=block&cut_after=15")
    first = request(a.port, "GET", events)
    assert first.status == 200 and first.ids == list(range(15)) and not first.done
    second = request(b.port, "GET", events, last_event_id=first.ids[-1])
    assert second.status == 200 and second.done
    ids = first.ids + second.ids
    assert ids == list(range(n)) and "".join(first.texts + second.texts) == "".join(ANSWER[:n])
    made = runs(owners(url, events.split("/")[2], a, b))
    assert [name for name, _ in made] == ["A", "B"] and made[0][1] >= 15


def test_failover_after_sigkill_mid_generation(pair):
    url, a, b = pair
    n = 80
    events = create(a, f"tokens={n}&producer_ms=25&scenario=block")
    stream_id = events.split("/")[2]
    seen: dict[str, object] = {}

    def slow_then_kill(reply: Reply) -> None:
        # a reader slower than the model (40 ms a token against 25): A's log runs ahead of what it has read;
        # at the 20th token, with this connection still open (A's reader of record is attached, so nothing has
        # cancelled A's producer yet), read the log's length and lease, then SIGKILL A while it generates.
        if len(reply.ids) < 20:
            time.sleep(0.04)
            return
        seen["logged"], seen["owner"] = _log(url).length(stream_id), _log(url).owner(stream_id)
        a.kill()

    first = request(a.port, "GET", events, stop_after=20, on_token=slow_then_kill)
    logged_before_kill, lease_owner = seen["logged"], seen["owner"]
    assert not a.alive() and logged_before_kill < n
    assert lease_owner is not None and f":{a.pid}/" in lease_owner    # A held the lease when it died
    killed_at = time.monotonic()
    arrived: list[float] = []
    second = request(b.port, "GET", events, last_event_id=first.ids[-1],
                     on_token=lambda r: arrived.append(time.monotonic()))
    ids = first.ids + second.ids
    assert second.status == 200 and second.done
    assert ids == list(range(n)), f"duplicates or gaps: {ids}"
    assert "".join(first.texts + second.texts) == "".join(ANSWER[:n])
    made = runs(owners(url, stream_id, a, b))
    assert [name for name, _ in made] == ["A", "B"]
    print(f"\nfailover: A (pid {a.pid}) SIGKILLed after the reader had ids 0..{first.ids[-1]} "
          f"and A had logged {logged_before_kill} tokens; reconnect to B with Last-Event-ID: {first.ids[-1]}; "
          f"B replayed {made[0][1] - len(first.ids)} from the log, took over at index {made[0][1]} "
          f"once the {LEASE_MS} ms lease expired and generated {made[1][1]}; "
          f"reader got ids 0..{ids[-1]} ({len(ids)} tokens, {len(set(ids))} distinct), text exact; "
          f"log owners {made}; after the kill: first resumed token (replayed) at "
          f"{1000 * (arrived[0] - killed_at):.0f} ms, first token B generated at "
          f"{1000 * (arrived[made[0][1] - len(first.ids)] - killed_at):.0f} ms")


def test_reconnects_to_both_instances_at_once_generate_each_index_once(pair):
    url, a, b = pair
    n = 120
    events = create(a, f"tokens={n}&producer_ms=3&scenario=block&cut_after=10")
    first = request(a.port, "GET", events)
    assert first.ids == list(range(10))
    replies: dict[str, object] = {}

    def reconnect(inst: Instance) -> None:
        replies[inst.name] = request(inst.port, "GET", events, last_event_id=9)
    threads = [threading.Thread(target=reconnect, args=(inst,)) for inst in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for name in ("A", "B"):
        reply = replies[name]
        assert reply.status == 200 and reply.done, (name, reply)
        assert first.ids + reply.ids == list(range(n)), name
    made = runs(owners(url, events.split("/")[2], a, b))          # asserts each index logged exactly once
    assert sum(count for _, count in made) == n and len(made) <= 3


def test_redis_stopped_gives_503_then_recovers(own_redis):
    a, b = Instance(own_redis.url, "A"), Instance(own_redis.url, "B")
    try:
        events = create(a, "tokens=200&producer_ms=10&scenario=block")
        got: list[int] = []
        reading, ended = threading.Event(), []

        def read() -> None:
            reply = request(a.port, "GET", events, on_token=lambda r: reading.set())
            got.extend(reply.ids)
            ended.append(reply.done)
        reader = threading.Thread(target=read)
        reader.start()
        assert reading.wait(10)
        own_redis.stop()
        reader.join(15)
        assert not reader.is_alive() and ended == [False] and 0 < len(got) < 200   # the stream ended, without done
        assert got == list(range(len(got)))
        for inst, method, path, cursor in ((a, "POST", "/streams?tokens=10", None),
                                           (b, "GET", events, got[-1]), (a, "GET", events, got[-1])):
            down = request(inst.port, method, path, last_event_id=cursor)
            assert down.status == 503, (inst.name, method, down)
            assert down.headers["retry-after"] == "1"
            assert down.json() == {"error": "the token log is unavailable"}      # no host: issue 22
        assert a.alive() and b.alive()
        own_redis.start()                                          # back, and empty (no persistence)
        assert request(b.port, "GET", events, last_event_id=got[-1]).status == 404
        fresh = create(a, "tokens=30&producer_ms=1&scenario=block")
        reply = request(b.port, "GET", fresh)
        assert reply.status == 200 and reply.done and reply.ids == list(range(30))
    finally:
        a.kill()
        b.kill()
