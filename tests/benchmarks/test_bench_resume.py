"""The bench hook: resume latency on both logs returns sane figures and leaves no keys behind."""

from __future__ import annotations

from support.redis import redis_command

from bench.bench_resume import resume_latency

KEYS = {"log", "samples", "p50_ms", "p95_ms", "mean_ms", "min_ms", "max_ms", "what"}


def test_resume_latency_memory_and_redis(redis_server):
    memory = resume_latency(None, samples=3)
    shared = resume_latency(redis_server.url, samples=3)
    for result, kind in ((memory, "memory"), (shared, "redis")):
        assert set(result) == KEYS and result["log"] == kind and result["samples"] == 3
        assert 0 < result["min_ms"] <= result["p50_ms"] <= result["p95_ms"] <= result["max_ms"]
    assert redis_command(redis_server.url, "DBSIZE") == 0
