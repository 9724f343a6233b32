"""RedisTokenLog: the TokenLog contract (shared with MemoryTokenLog), then the lease and fencing."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from support.live import await_until, wait_until
from support.redis import client_list, lease_expired
from support.requirements import free_port

from tokenwire.core.pipeline import RunSpec
from tokenwire.core.tokenlog import (
    IndexConflict,
    LeaseLost,
    LogGap,
    LogUnavailable,
    MemoryTokenLog,
    StreamState,
    UnknownStream,
)


def _redis_log(url, **settings):
    from tokenwire.redislog.blocking import RedisTokenLog
    return RedisTokenLog(url, **settings)


@pytest.fixture(params=["memory", "redis"])
def make_log(request):
    """A factory for either implementation; ``max_tokens`` maps to Redis's MAXLEN."""
    if request.param == "memory":
        yield lambda max_tokens=100_000: MemoryTokenLog(lambda: 0, max_tokens=max_tokens)
        return
    server = request.getfixturevalue("redis_server")
    logs = []

    def make(max_tokens=100_000):
        logs.append(_redis_log(server.url, maxlen=max_tokens))
        return logs[-1]
    yield make
    for log in logs:
        log.close()


# -- the contract both logs keep -------------------------------------------------
def test_exclusive_cursor_and_appends_in_order(make_log):
    log = make_log()
    log.create("s", {"seed": 1}, total=5)
    for i, tok in enumerate(["a", " b", "\n\n", "d"]):
        log.append("s", i, tok)
    assert log.length("s") == 4
    assert log.read_after("s", -1) == ["a", " b", "\n\n", "d"]
    assert log.read_after("s", 1) == ["\n\n", "d"]          # Last-Event-ID 1 -> from 2
    assert log.read_after("s", 3) == []
    assert log.read_after("s", 0, limit=2) == [" b", "\n\n"]
    assert log.read_after("s", 0, limit=0) == []
    assert log.meta("s") == {"seed": 1} and log.total("s") == 5


def test_an_index_is_never_appended_twice_or_skipped(make_log):
    log = make_log()
    log.create("s", {}, total=3)
    log.append("s", 0, "a")
    with pytest.raises(IndexConflict, match="cannot append index 0, the next index is 1"):
        log.append("s", 0, "other")
    with pytest.raises(IndexConflict, match="cannot append index 2, the next index is 1"):
        log.append("s", 2, "c")
    log.append("s", 1, "b")
    log.append("s", 2, "c")
    with pytest.raises(IndexConflict):
        log.append("s", 3, "past the end")
    assert log.read_after("s", -1) == ["a", "b", "c"]


def test_trimmed_cursor_is_a_gap_not_a_silent_skip(make_log):
    log = make_log(max_tokens=3)
    log.create("s", {}, total=10)
    for i in range(6):
        log.append("s", i, str(i))
    assert log.length("s") == 6
    assert log.read_after("s", 2) == ["3", "4", "5"]
    with pytest.raises(LogGap) as err:
        log.read_after("s", 1)
    assert str(err.value) == "stream 's' no longer holds the tokens after cursor 1: the log keeps indices from 3 on"


def test_unknown_stream_and_duplicate_create(make_log):
    log = make_log()
    for call in (lambda: log.length("nope"), lambda: log.read_after("nope", -1), lambda: log.meta("nope"),
                 lambda: log.append("nope", 0, "x"), lambda: log.set_state("nope", StreamState.DONE)):
        with pytest.raises(UnknownStream, match=r"unknown stream 'nope' \(never created, or evicted"):
            call()
    log.create("s", {}, total=1)
    with pytest.raises(ValueError, match="stream 's' already exists"):
        log.create("s", {}, total=1)
    with pytest.raises(ValueError, match="cursor must be -1 or a token index, got -2"):
        log.read_after("s", -2)


def test_state_moves_from_generating(make_log):
    log = make_log()
    log.create("s", {}, total=2)
    assert log.state("s") is StreamState.GENERATING
    log.set_state("s", StreamState.CANCELLED)
    assert log.state("s") is StreamState.CANCELLED
    log.set_state("s", StreamState.GENERATING)
    log.set_state("s", StreamState.DONE)
    assert log.state("s") is StreamState.DONE


# -- Redis only: layout, bounds, lease, fencing ------------------------------------
@pytest.fixture
def url(redis_server):
    return redis_server.url


def test_entries_are_keyed_by_index_and_redis_refuses_a_second_xadd(url):
    import redis
    log = _redis_log(url)
    log.create("s", {}, total=3)
    log.append("s", 0, "a")
    log.append("s", 1, "b")
    raw = redis.Redis.from_url(url, decode_responses=True)
    tokens = log.keys("s")[1]
    assert [entry_id for entry_id, _ in raw.xrange(tokens)] == ["1-1", "1-2"]   # epoch 1
    with pytest.raises(redis.ResponseError, match="equal or smaller"):
        raw.xadd(tokens, {"t": "again"}, id="1-2")
    assert [(i, t) for i, t, _ in log.entries("s")] == [(0, "a"), (1, "b")]


def test_ttl_is_armed_at_creation_and_rearmed_by_the_lease_renewal(url):
    log = _redis_log(url, ttl_ms=5_000, lease_ms=300)
    log.create("s", {}, total=3)
    log.append("s", 0, "a")
    assert all(0 < t <= 5_000 for t in log.key_ttls_ms("s"))       # armed at creation

    def run_down() -> tuple[int, int] | None:          # by Redis's clock: the TTLs have run down 200 ms
        ttls = log.key_ttls_ms("s")
        return ttls if all(0 < t <= 4_800 for t in ttls) else None
    before = wait_until(run_down, "the TTLs to run down to 4.8 s")

    import redis
    plain = redis.Redis.from_url(url)                   # its own connection: the log's is this loop's
    keys = (f"{log.prefix}:{{s}}:meta", f"{log.prefix}:{{s}}:tokens")

    def renewed() -> list[int] | None:
        ttls = [plain.pttl(key) for key in keys]
        return ttls if all(t > b for t, b in zip(ttls, before, strict=True)) else None

    async def own_until_renewed() -> list[int]:
        await log.aio.claim("s")                        # owned: the writer renews the lease on its timer
        after = await await_until(renewed, "the renewal to re-arm the TTLs")
        log.aio.disown("s")
        await log.aio.close()
        return after
    after = asyncio.run(own_until_renewed())
    assert all(t <= 5_000 for t in after)


def test_expired_stream_is_unknown(url):
    log = _redis_log(url, ttl_ms=100)
    log.create("s", {}, total=3)
    log.append("s", 0, "a")

    def unknown() -> bool:
        try:
            log.length("s")
        except UnknownStream:
            return True
        return False
    wait_until(unknown, "the stream's keys to expire")


def test_lease_fences_a_second_instance(url):
    a, b = _redis_log(url, name="A", lease_ms=200), _redis_log(url, name="B", lease_ms=200)
    a.create("s", {}, total=4)
    assert a.claim("s").owned and a.owner("s") == a.owner_id
    claim = b.claim("s")
    assert not claim.owned and claim.owner == a.owner_id and claim.length == 0
    a.append("s", 0, "a")
    with pytest.raises(LeaseLost, match=r"stream 's' is generated by 'A/[0-9a-f]{8}'; this instance lost its lease"):
        b.append("s", 1, "b")
    lease_expired(url, "s")                            # A stalls: its lease (nothing renews it) runs out
    assert b.claim("s").owned
    b.append("s", 1, "b")
    with pytest.raises(LeaseLost):
        a.append("s", 2, "zombie")                     # the old owner is fenced off
    assert [(i, by.split("/")[0]) for i, _, by in b.entries("s")] == [(0, "A"), (1, "B")]


def test_done_is_final_and_releases_the_lease_cancel_elsewhere_is_ignored(url):
    a, b = _redis_log(url, name="A"), _redis_log(url, name="B")
    a.create("s", {}, total=2)
    a.claim("s")
    b.set_state("s", StreamState.CANCELLED)            # B's reader left; A still generates
    assert a.state("s") is StreamState.GENERATING
    a.set_state("s", StreamState.CANCELLED)            # A's reader left: A stops and lets go
    assert a.state("s") is StreamState.CANCELLED and a.owner("s") is None
    assert b.claim("s").owned and b.state("s") is StreamState.GENERATING   # B's reader resumes: B takes over
    b.append("s", 0, "x")
    b.append("s", 1, "y")
    b.set_state("s", StreamState.DONE)
    assert b.owner("s") is None
    b.set_state("s", StreamState.GENERATING)
    assert b.state("s") is StreamState.DONE
    assert not a.claim("s").owned                      # a finished stream is never claimed


def test_a_failure_is_stored_with_its_state_and_dropped_when_the_stream_is_generated_again(url):
    a, b = _redis_log(url, name="A"), _redis_log(url, name="B")
    a.create("s", {}, total=2)
    a.claim("s")
    b.set_state("s", StreamState.CANCELLED, "the model raised KeyError")   # not B's lease: ignored, failure too
    assert (a.state("s"), a.failure("s")) == (StreamState.GENERATING, None)
    a.set_state("s", StreamState.CANCELLED, "the model raised KeyError")
    assert (b.state("s"), b.failure("s")) == (StreamState.CANCELLED, "the model raised KeyError")
    assert b.claim("s").owned                            # generated again: no stale failure is left
    assert (b.state("s"), b.failure("s")) == (StreamState.GENERATING, None)
    b.set_state("s", StreamState.CANCELLED, "the model raised KeyError")
    b.set_state("s", StreamState.DONE)                   # cancelled -> done is allowed: the failure goes with it
    assert (a.state("s"), a.failure("s")) == (StreamState.DONE, None)


def test_a_retried_append_that_already_landed_succeeds(url):
    log = _redis_log(url)
    log.create("s", {}, total=3)
    log.append("s", 0, "a")
    log.append("s", 0, "a")                            # the first reply was lost; same owner, same token
    assert log.length("s") == 1


def test_wait_after_blocks_until_a_token_lands(redis_server):
    url = redis_server.url
    a, b = _redis_log(url, name="A", block_ms=2_000), _redis_log(url, name="B", block_ms=100)
    a.create("s", {}, total=3)
    assert b.wait_after("s", -1) == []                 # times out: the follower's heartbeat
    failed: list[BaseException] = []

    def append_once_blocked() -> None:                 # the token lands while A's read is blocked in Redis
        try:
            wait_until(lambda: any(client["cmd"] == "xread" and "b" in client["flags"]
                                   for client in client_list(redis_server.port)), "A's read to block in Redis")
            a.append("s", 0, "a")
        except BaseException as exc:  # noqa: BLE001 - the test thread reports it
            failed.append(exc)
    appender = threading.Thread(target=append_once_blocked)
    appender.start()
    started = time.monotonic()
    got = a.wait_after("s", -1)
    appender.join(10)
    assert not failed, failed
    assert got == [(0, "a")] and time.monotonic() - started < 2.0


def test_url_settings_and_errors(url):
    log = _redis_log(url + "?lease_ms=1234&maxlen=7&ttl_ms=9000&block_ms=50&socket_keepalive=true")
    assert (log.lease_ms, log.maxlen, log.ttl_ms, log.block_ms) == (1234, 7, 9000, 50)
    assert "lease_ms" not in log.url and "socket_keepalive" in log.url
    with pytest.raises(ValueError, match=r"log URL must start with redis://, rediss://, unix://, "
                                         r"redis\+sentinel:// or rediss\+sentinel://, got 'http://x'"):
        _redis_log("http://x")
    with pytest.raises(ValueError, match="lease_ms must be a positive int, got '0'"):
        _redis_log(url + "?lease_ms=0")


def test_redis_down_is_log_unavailable_quickly():
    pytest.importorskip("redis")
    log = _redis_log(f"redis://127.0.0.1:{free_port()}/0")
    started = time.monotonic()
    with pytest.raises(LogUnavailable,
                       match=r"token log unavailable: redis at redis://127\.0\.0\.1:\d+/0: ConnectionError"):
        log.create("s", {}, total=1)
    assert time.monotonic() - started < 5
    assert log.ping() is False


# -- selection: --log / TOKENWIRE_LOG_URL ---------------------------------------------
def test_the_log_is_chosen_by_flag_or_environment(monkeypatch, capsys):
    pytest.importorskip("redis")
    from tokenwire.endpoints.logs import make_registry
    from tokenwire.live.command import cli_main
    from tokenwire.redislog.blocking import RedisTokenLog
    monkeypatch.delenv("TOKENWIRE_LOG_URL", raising=False)
    assert isinstance(make_registry(None).log, MemoryTokenLog)
    monkeypatch.setenv("TOKENWIRE_LOG_URL", f"redis://127.0.0.1:{free_port()}/0?lease_ms=700")
    registry = make_registry(None)
    assert isinstance(registry.log, RedisTokenLog) and registry.log.lease_ms == 700
    assert isinstance(make_registry("memory").log, MemoryTokenLog)            # the flag wins
    with pytest.raises(LogUnavailable):                                       # Redis down: an error per request
        registry.create(RunSpec(tokens=5))
    assert cli_main(["--port", "0", "--log", "ftp://x"]) == 2
    assert ("--log must be 'memory' or a redis://, rediss://, unix://, redis+sentinel:// or rediss+sentinel:// URL; got 'ftp://x'"
            in capsys.readouterr().err)
