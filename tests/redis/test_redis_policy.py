"""What tokenwire says of Redis's eviction policy, on a real ``redis-server``: one warning on the ``tokenwire``
logger per Redis and process when ``maxmemory-policy`` is anything but ``noeviction``, nothing under
``noeviction``, and nothing (and a log that works) where ``CONFIG`` is refused; ``tokenwire serve`` says it at
start-up, on stderr.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading

import pytest
from support.redis import allow, running_redis

WARNING = ("redis at redis://127.0.0.1:{port}/0 may evict keys (maxmemory-policy {policy}): a stream whose tokens "
           "it evicts is lost (its readers get the early-stop done, reason 'lost'; a resume gets 410); tokenwire "
           "needs maxmemory-policy noeviction, or a maxmemory that holds every stream kept")


class _Said(logging.Handler):
    """What the ``tokenwire`` logger says while the test runs."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def said(monkeypatch):
    # The servers asked are remembered per process by URL: a worker that ran an earlier test's Redis on the same
    # port would say nothing of this one.  Each test starts with none asked.
    from tokenwire.redislog import policy
    monkeypatch.setattr(policy, "_asked", set())
    logger = logging.getLogger("tokenwire")
    handler, level = _Said(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _use(url: str, times: int = 2) -> None:
    """Open ``times`` logs on ``url`` (as several apps of one process do), each used on two event loops."""
    from tokenwire.redislog.blocking import RedisTokenLog
    for _ in range(times):
        log = RedisTokenLog(url)
        for _ in range(2):                     # a connection, closed, and another one
            assert log.ping()
            log.close()


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-ttl"])
def test_an_evicting_policy_is_warned_about_once(said, policy):
    with running_redis("--maxmemory-policy", policy) as redis_server:
        allow(redis_server.url, "+config|get")          # the docs' rule leaves it out: no warning without it
        _use(redis_server.url)
    assert said == [WARNING.format(port=redis_server.port, policy=policy)]


def test_noeviction_says_nothing(said):
    with running_redis() as redis_server:
        allow(redis_server.url, "+config|get")          # asked and answered noeviction: nothing to say
        _use(redis_server.url)
    assert said == []


def test_a_redis_that_refuses_config_says_nothing_and_the_log_works(said):
    from tokenwire.redislog.blocking import RedisTokenLog
    with running_redis("--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", "") as redis_server:
        log = RedisTokenLog(redis_server.url)
        log.create("s", {}, 3)
        assert log.read_after("s", -1) == [] and log.ping()
        log.close()
        _use(redis_server.url)
    assert said == []


def test_serve_says_it_at_start_up():
    with running_redis("--maxmemory-policy", "allkeys-lru") as redis_server:
        allow(redis_server.url, "+config|get")
        proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "serve", "--port", "0", "--log", redis_server.url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend([proc.stdout.readline(), proc.stderr.readline()]))
        reader.start()
        reader.join(20)                        # the banner, then the check's first line on stderr
        proc.terminate()
        _, rest = proc.communicate(timeout=20)
    banner, said = lines
    assert "serving on http://127.0.0.1:" in banner
    assert said == f"tokenwire serve: {WARNING.format(port=redis_server.port, policy='allkeys-lru')}\n"
    assert "may evict keys" not in rest                                       # once
