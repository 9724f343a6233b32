"""Real eviction: a ``redis-server`` with a small ``maxmemory`` and ``maxmemory-policy allkeys-lru``, filler keys
written all along, and streams generating and finished on three processes (two uvicorn processes serving a
user's model continued by a take-over and the canned answer, one ``tokenwire serve``).

Readers read as an ``EventSource`` does (cut, reconnect with ``Last-Event-ID`` on another process, retry on a
503) and every ``(stream, index, token)`` any of them sees is recorded.  What is asserted: no index of any
stream reaches any reader in two versions (the model's tokens name the factory call that made them; the canned
answer's are its text); no reader hangs (every wait is bounded) or reconnects without end; no stream ends with
a ``done`` that is empty or short without saying it stopped early; no resume gets a 400; the factory is called
from index 0 once per stream; a canned stream seen lost is never served again; and Redis did evict.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.asgi import uvicorn
from support.instances import Instance, Reply, request
from support.live import wait_until
from support.redis import admin, running_redis

from tokenwire.core.model import ANSWER

# A Redis this small (an empty one uses about 1 MB) holds a few dozen streams and little else.
MAXMEMORY = "3mb"
# Filler values: 20 KB each, written all along, so that Redis evicts all the time.
FILLER_BYTES = 20_000
FILL_EVERY_S = 0.01             # 2 MB a second: the streams' keys are evicted within seconds of their last use
# Once every reader has ended, each finished stream is read afresh after every SWEEP_FILLS filler keys (1 MB).
SWEEPS, SWEEP_FILLS = 5, 50
TOKENS = 200
# How many times a reader reconnects before the test calls it a reconnect loop.
MAX_ATTEMPTS = 12
WAVES, WAVE_GAP_S = 3, 1.5


@dataclass
class Stream:
    sid: str
    kind: str                                   # "canned" or "model"
    urls: list[tuple[int, str]]                 # (port, events path) on each process that serves it


@dataclass
class Seen:
    """Everything the readers saw."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    tokens: dict[tuple[str, int], set[str]] = field(default_factory=lambda: defaultdict(set))
    reads: list[tuple[str, float, float, Reply]] = field(default_factory=list)    # sid, started, ended, reply
    endings: list[tuple[str, str]] = field(default_factory=list)                    # sid, how the reader ended
    problems: list[str] = field(default_factory=list)

    def read(self, stream: Stream, port: int, path: str, cursor: int | None, cut: int | None) -> Reply | None:
        started = time.monotonic()
        try:
            reply = request(port, "GET", path, last_event_id=cursor, stop_after=cut)
        except TimeoutError as exc:
            with self.lock:
                self.problems.append(f"{stream.sid}: a reader waited past the socket timeout on :{port} ({exc})")
            return None
        with self.lock:
            self.reads.append((stream.sid, started, time.monotonic(), reply))
            for index, text in zip(reply.ids, reply.texts, strict=True):
                self.tokens[(stream.sid, index)].add(text)
        return reply


def _follow(stream: Stream, seen: Seen, first: int, cut: int | None) -> None:
    """Read ``stream`` to its end as an EventSource would, starting on ``stream.urls[first]``."""
    cursor: int | None = None
    for attempt in range(MAX_ATTEMPTS):
        port, path = stream.urls[(first + attempt) % len(stream.urls)]
        reply = seen.read(stream, port, path, cursor, cut if attempt == 0 else None)
        if reply is None:
            return
        if reply.status == 200:
            after = -1 if cursor is None else cursor
            expected = list(range(after + 1, after + 1 + len(reply.ids)))
            if reply.ids != expected:
                seen.problems.append(f"{stream.sid}: ids {reply.ids[:5]}... after cursor {cursor}")
            cursor = reply.ids[-1] if reply.ids else cursor
            if reply.done:
                seen.endings.append((stream.sid, _ending(stream, reply, seen)))
                return
        elif reply.status in (204, 404, 410):
            seen.endings.append((stream.sid, str(reply.status)))
            return
        elif reply.status == 503:
            time.sleep(0.2)                         # a client's back-off before it retries (as an EventSource's)
        else:
            seen.problems.append(f"{stream.sid}: {reply.status} {reply.body[:200]!r} to cursor {cursor}")
            return
    seen.problems.append(f"{stream.sid}: no ending after {MAX_ATTEMPTS} connections (cursor {cursor})")


def _ending(stream: Stream, reply: Reply, seen: Seen) -> str:
    ending = reply.ending
    if ending.get("stopped_early"):
        return str(ending["reason"])
    if ending["tokens"] != TOKENS:                  # a plain done says the answer is whole
        seen.problems.append(f"{stream.sid}: done says {ending} without stopping early")
    return "done"


def _fill(url: str, stop: threading.Event, written: list[int]) -> None:
    import redis
    raw = redis.Redis.from_url(admin(url))
    value = b"x" * FILLER_BYTES
    while not stop.is_set():
        try:
            raw.set(f"filler:{written[0]}", value)
            written[0] += 1
        except redis.RedisError:
            pass                                    # out of memory for a moment: write on
        time.sleep(FILL_EVERY_S)                    # the filler's pace: the memory pressure, not an order
    raw.close()


def _make(kind: str, maker: tuple[int, str], readers: list[tuple[int, str]], query: str) -> Stream | None:
    port, prefix = maker
    made = request(port, "POST", f"{prefix}/streams?{query}")
    if made.status != 201:
        return None                                 # Redis was out of memory for the create: a 503
    sid = made.json()["stream_id"]
    return Stream(sid, kind, [(p, f"{pre}/streams/{sid}/events") for p, pre in readers])


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])          # tokenwire serve's event loop
def test_under_allkeys_lru_pressure_no_index_has_two_versions_and_every_reader_ends(tmp_path: Path, loop: str) -> None:
    calls = tmp_path / "calls.jsonl"
    rng = random.Random(22)
    with running_redis("--maxmemory", MAXMEMORY, "--maxmemory-policy", "allkeys-lru") as redis_server:
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?lease_ms=400&block_ms=50",
               "TOKENWIRE_TEST_CALLS": str(calls)}
        serve = Instance(redis_server.url, "S", loop)
        try:
            with (uvicorn("support.apps.eviction:app", env=env) as one,
                  uvicorn("support.apps.eviction:app", env=env) as other):
                canned = [(one.port, "/canned"), (other.port, "/canned"), (serve.port, "")]
                tagged = [(one.port, "/tagged"), (other.port, "/tagged")]
                seen, streams, readers = Seen(), [], []
                stop, written = threading.Event(), [0]
                filler = threading.Thread(target=_fill, args=(redis_server.url, stop, written))
                filler.start()
                try:
                    for _ in range(WAVES):
                        made = [_make("canned", canned[0], canned, f"tokens={TOKENS}&producer_ms=10")
                                for _ in range(3)]
                        made += [_make("canned", canned[2], canned, f"tokens={TOKENS}&producer_ms=10")
                                 for _ in range(2)]
                        made += [_make("model", tagged[0], tagged, f"n={TOKENS}&delay_ms=10") for _ in range(3)]
                        for stream in filter(None, made):
                            streams.append(stream)
                            for first, cut in ((0, rng.randrange(5, 60)), (1, None)):
                                reader = threading.Thread(target=_follow, args=(stream, seen, first, cut))
                                reader.start()
                                readers.append(reader)
                        time.sleep(WAVE_GAP_S)      # the load's shape: waves of streams, not an order
                    for reader in readers:
                        reader.join(120)
                    for sweep in range(SWEEPS):                # fresh readers of the finished streams,
                        wanted = written[0] + SWEEP_FILLS      # while they are evicted
                        wait_until(lambda wanted=wanted: written[0] >= wanted, f"{SWEEP_FILLS} more filler keys")
                        for stream in streams:
                            _follow(stream, seen, sweep, None)
                finally:
                    stop.set()
                    filler.join(30)
                evicted = int(_info(redis_server.url)["evicted_keys"])
        finally:
            serve.kill()
    assert not [r for r in readers if r.is_alive()], "a reader still runs"
    assert seen.problems == []
    versions = {key: texts for key, texts in seen.tokens.items() if len(texts) > 1}
    assert versions == {}, f"two versions of {len(versions)} indexes: {sorted(versions.items())[:5]}"
    kinds = {stream.sid: stream.kind for stream in streams}
    assert all(text == ANSWER[index] for (sid, index), texts in seen.tokens.items() if kinds[sid] == "canned"
               for text in texts)
    _assert_factory_called_from_0_once(calls, [s.sid for s in streams if s.kind == "model"])
    _assert_no_canned_stream_served_after_it_was_seen_lost(seen, kinds)
    outcomes = defaultdict(int)
    for _, how in seen.endings:
        outcomes[how] += 1
    print(f"evicted {evicted} keys; {len(streams)} streams; {sum(len(t) for t in seen.tokens.values())} "
          f"(stream, index) seen; endings {dict(outcomes)}")
    assert evicted > 0 and len(streams) >= 20
    assert outcomes["410"] + outcomes["lost"] > 0                     # the loss was met, and said


def _info(url: str) -> dict[str, str]:
    import redis
    raw = redis.Redis.from_url(admin(url), decode_responses=True)
    try:
        return {key: str(value) for key, value in raw.info("stats").items()}
    finally:
        raw.close()


def _assert_factory_called_from_0_once(calls: Path, model_sids: list[str]) -> None:
    starts: dict[str, list[int]] = defaultdict(list)
    for call in map(json.loads, calls.read_text().splitlines()):
        starts[call["stream_id"]].append(call["start"])
        assert call["start"] == len(call["prefix"])
    assert all(starts[sid].count(0) == 1 for sid in model_sids), {sid: starts[sid] for sid in model_sids}


def _assert_no_canned_stream_served_after_it_was_seen_lost(seen: Seen, kinds: dict[str, str]) -> None:
    lost_at: dict[str, float] = {}
    for sid, _, ended, reply in seen.reads:
        if reply.status == 410 or reply.ending.get("reason") == "lost":
            lost_at[sid] = min(ended, lost_at.get(sid, ended))
    served = [(sid, reply.ids[:3]) for sid, started, _, reply in seen.reads
              if kinds[sid] == "canned" and sid in lost_at and started > lost_at[sid] and reply.ids]
    assert served == [], "a lost canned stream was generated again"

