"""Extra line (8): resume latency, reconnect to first resumed token, in-memory log vs Redis.

How this works: ``bench_resume.resume_latency`` (written with the Redis
token log) does the measuring; this module runs it for the in-memory log
and, when ``redis-server`` is installed, for a private throwaway Redis on
loopback, and puts both on one row.
"""

from __future__ import annotations

from .bench_resume import private_redis, resume_latency
from .common import Row

__all__ = ["run"]


def run(quick: bool) -> list[Row]:
    samples = 5 if quick else 30
    memory = resume_latency(None, samples)
    notes = [f"p50 over {samples} reconnects each; memory: {memory['what']}"]
    with private_redis() as url:
        if url is None:
            notes.append("redis-server is not installed: the Redis figure is missing")
            return [Row(8, "resume latency p50 (p95), ms", f"memory {memory['p50_ms']:.2f} ({memory['p95_ms']:.2f})",
                        notes=tuple(notes))]
        redis = resume_latency(url, samples)
    notes.append(f"redis: {redis['what']} (private redis-server on loopback)")
    return [Row(8, "resume latency p50 (p95), ms", f"memory {memory['p50_ms']:.2f} ({memory['p95_ms']:.2f})",
                f"redis {redis['p50_ms']:.2f} ({redis['p95_ms']:.2f})", redis["p50_ms"] / memory["p50_ms"],
                notes=tuple(notes))]
