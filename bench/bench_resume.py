"""Resume latency: from a reconnect with Last-Event-ID to the first resumed token, in-memory log vs Redis.

How this works: a stream of ``TOKENS`` tokens runs on real threads until its
reader hangs up after ``CUT`` tokens (the producer is cancelled, as the
server does when a reader leaves).  Then the reader reconnects with its last
id and the clock runs from the reconnect to the arrival of the first token
frame of the new connection (index ``CUT``), which comes out of the log:

- memory: the same ``Stream`` object takes the reconnect (an in-memory log
  can only be resumed by the process that holds it);
- redis: a second instance (its own ``RedisTokenLog``, as another process
  behind a load balancer would have) rebuilds the stream from the log's meta
  (``attach_stream``) and replays from ``XRANGE``.  That is the case the
  shared log exists for, so its figure includes the attach.

``resume_latency(None)`` measures the in-memory log, ``resume_latency(url)``
Redis at ``url``; ``private_redis()`` starts a throwaway ``redis-server`` on
a free loopback port (no persistence) for a bench run that has none.
"""

from __future__ import annotations

import secrets
import shutil
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tokenwire.core.clock import RealClock
from tokenwire.core.pipeline import RunSpec
from tokenwire.core.reader import MemoryReader
from tokenwire.core.stream import Stream
from tokenwire.core.tokenlog import MemoryTokenLog, TokenLog
from tokenwire.endpoints.logs import attach_stream, new_stream
from tokenwire.realtime import LoopDriver

from .redis_scale import RedisServer

__all__ = ["private_redis", "resume_latency"]

TOKENS = 60          # answer length of each measured stream
CUT = 20             # the reader hangs up after this many tokens
SAMPLES = 30         # reconnects measured per log
JOIN_TIMEOUT_S = 30.0


def _connect(stream: Stream, reader: MemoryReader, cursor: int, clock: RealClock) -> None:
    """Run one connection to its end on a private event loop."""
    driver = LoopDriver.private(clock)
    reader.begin_connection()

    def client() -> Any:
        yield from stream.serve(cursor, stream.new_channel())
    driver.spawn(client(), reader)
    driver.run()


def _one(clock: RealClock, make: Any, resume: Any) -> float:
    """One cut-and-reconnect; returns ms from the reconnect to the first resumed token."""
    stream_id = f"bench-{secrets.token_urlsafe(8)}"
    spec = RunSpec(tokens=TOKENS, producer_ms=0.2, capacity=4)
    stream = make(stream_id, spec)
    reader = MemoryReader(reader_ns=1_000_000, hang_up_after=CUT)   # slower than the model: the log runs ahead
    _connect(stream, reader, -1, clock)           # the producer is cancelled and ends
    reader.free_at = 0                  # the reconnecting reader is idle, not still busy with token CUT-1
    start = clock.now()
    again = resume(stream_id, stream)
    _connect(again, reader, reader.cursor, clock)
    if reader.ids != list(range(TOKENS)):
        raise RuntimeError(f"resume lost or repeated ids: {reader.ids}")
    return (reader.arrivals[CUT] - start) / 1e6


def resume_latency(log_url: str | None, samples: int = SAMPLES) -> dict[str, Any]:
    """Measure ``samples`` reconnects on the in-memory log (``log_url`` None) or Redis at ``log_url``.

    Returns a dict: ``log`` ("memory"/"redis"), ``samples``, ``p50_ms``,
    ``p95_ms``, ``mean_ms``, ``min_ms``, ``max_ms`` and ``what`` (one line
    saying what was timed).  Raises ``LogUnavailable`` if Redis is down,
    ``RuntimeError`` if a resume ever loses or repeats an id.
    """
    clock = RealClock()
    if log_url is None:
        log: TokenLog = MemoryTokenLog(clock.now)
        kind, what = "memory", "same process: replay from the in-memory log"

        def make(sid: str, spec: RunSpec) -> Stream:
            return new_stream(sid, spec, log)

        def resume(sid: str, stream: Stream) -> Stream:
            return stream
        cleanup: list[Any] = []
    else:
        from tokenwire.redislog.blocking import RedisTokenLog
        first, second = RedisTokenLog(log_url, name="bench-A"), RedisTokenLog(log_url, name="bench-B")
        kind, what = "redis", "another instance: attach from the log's meta, replay with XRANGE"
        made: list[str] = []

        def make(sid: str, spec: RunSpec) -> Stream:
            made.append(sid)
            return new_stream(sid, spec, first)

        def resume(sid: str, stream: Stream) -> Stream:
            return attach_stream(sid, second)
        cleanup = [first, second, made]
    try:
        times = sorted(_one(clock, make, resume) for _ in range(samples))
    finally:
        if cleanup:
            first_log, second_log, ids = cleanup
            for sid in ids:
                first_log.delete(sid)
            first_log.close()
            second_log.close()
    p95 = statistics.quantiles(times, n=20, method="inclusive")[18] if len(times) > 1 else times[0]
    return {"log": kind, "samples": len(times), "p50_ms": statistics.median(times), "p95_ms": p95,
            "mean_ms": statistics.fmean(times), "min_ms": times[0], "max_ms": times[-1], "what": what}


@contextmanager
def private_redis() -> Iterator[str | None]:
    """A throwaway ``redis-server`` (``redis_scale.RedisServer``) for the run; yields its URL (None without the
    binary)."""
    if shutil.which("redis-server") is None:
        yield None
        return
    server = RedisServer()
    try:
        yield server.url
    finally:
        server.stop()


if __name__ == "__main__":
    print(resume_latency(None))
    with private_redis() as url:
        print(resume_latency(url) if url else "redis-server not installed")
