"""Issue 19: what a reader waits when the instance serving its stream dies, and when ``max_duration_s`` cuts it.

How this works: two uvicorn instances serve ``tests/support/apps/serverless.py``
(the canned answer, and a model with ``takeover="continue"``) on one
``redis-server`` with the log's default lease (2 s) and heartbeat (250 ms).

- *Death*: a stream is made on instance A and read there (A generates it:
  the canned answer's first reader's instance, the model's owner); after 25
  tokens A is SIGKILLed, and the reader reconnects at once to B with
  ``Last-Event-ID``.  The gap is from the last token received before the
  kill to the first token received after it: B waits for the dead lease to
  expire, takes it, and generates on (the canned answer from its own model,
  the continued model from the factory called again with the logged
  prefix).  A is started again and the roles swap; repeated ``kills`` times
  per kind.
- *max_duration_s*: both instances end every connection after 1 s at a
  frame boundary (``TOKENWIRE_MAX_DURATION_S=1``); the reader reconnects at
  once, to the other instance each time, as round robin would.  The
  generating instance is alive, so the stream goes on meanwhile; the gap at
  each cut is measured the same way, against the stream's ordinary gaps
  between tokens (20 ms a token).

Both readers reconnect at once: an ``EventSource`` would first wait the
stream's ``retry`` (750 ms), the same in both cases.  Percentiles
interpolate linearly (``statistics.quantiles(method="inclusive")``).

    python -m bench.resume_gap [--kills 20] [--cut-streams 6] [--lease-ms 600] [--only death|cut]
"""

from __future__ import annotations

import argparse
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import httpx
from httpx_sse import connect_sse

from .common import ROOT, env_with_root, machine
from .redis_scale import RedisServer
from .scale import _free_port

__all__ = ["cut_gaps", "death_gaps", "main"]

# The streams: 20 ms a token; the model is long enough to outlive a takeover.
CANNED = "/canned/streams?tokens=277&producer_ms=20"
MODEL = "/continued/streams?n=400&delay_ms=20"
# Tokens read before the kill.
BEFORE_KILL = 25


def _spawn(port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "support.apps.serverless:app", "--app-dir", f"{ROOT}/tests", "--host",
         "127.0.0.1", "--port", str(port), "--loop", "uvloop", "--http", "httptools", "--log-level", "warning",
         "--no-access-log"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"uvicorn did not listen on {port}")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def _tokens(base: str, path: str, last: str | None, stop_after: int | None,
            on_token: Callable[[str], None] | None = None) -> tuple[list[float], str | None, bool]:
    """Read ``path`` on ``base``; returns the arrival times, the last id, and whether ``done`` came."""
    times: list[float] = []
    headers = {} if last is None else {"Last-Event-ID": last}
    try:
        with (httpx.Client(timeout=httpx.Timeout(5.0, read=30.0)) as client,
              connect_sse(client, "GET", base + path, headers=headers) as source):
            for event in source.iter_sse():
                if event.event == "token":
                    times.append(time.monotonic())
                    last = event.id
                    if stop_after is not None and len(times) >= stop_after:
                        if on_token is not None:
                            on_token(event.id)
                        break
                elif event.event in ("done", "failed"):
                    return times, last, True
    except httpx.HTTPError:
        pass
    return times, last, False


def death_gaps(redis_url: str, stream: str, kills: int) -> list[float]:
    """The gaps (s) across ``kills`` instance deaths, reading ``stream`` (a create path) as the module says."""
    env = {**env_with_root(), "TOKENWIRE_TEST_LOG": redis_url}
    ports = [_free_port(), _free_port()]
    procs = [_spawn(port, env) for port in ports]
    gaps: list[float] = []
    try:
        for trial in range(kills):
            a, b = trial % 2, 1 - trial % 2
            base_a, base_b = (f"http://127.0.0.1:{ports[i]}" for i in (a, b))
            events_url = httpx.post(base_a + stream, timeout=10).json()["events_url"]
            before, last, _ = _tokens(base_a, events_url, None, BEFORE_KILL, lambda _, victim=procs[a]: _kill(victim))
            after, _, _ = _tokens(base_b, events_url, last, 1)
            if before and after:
                gaps.append(after[0] - before[-1])
            procs[a] = _spawn(ports[a], env)
    finally:
        for proc in procs:
            _kill(proc)
    return gaps


def cut_gaps(redis_url: str, stream: str, streams: int) -> tuple[list[float], list[float]]:
    """The gaps (s) at ``max_duration_s`` cuts, and the ordinary gaps between tokens, over ``streams`` streams."""
    env = {**env_with_root(), "TOKENWIRE_TEST_LOG": redis_url, "TOKENWIRE_MAX_DURATION_S": "1"}
    ports = [_free_port(), _free_port()]
    procs = [_spawn(port, env) for port in ports]
    at_cuts: list[float] = []
    within: list[float] = []
    try:
        for n in range(streams):
            bases = [f"http://127.0.0.1:{port}" for port in ports]
            events_url = httpx.post(bases[n % 2] + stream, timeout=10).json()["events_url"]
            last, previous, done, turn = None, None, False, n
            while not done:
                times, last, done = _tokens(bases[turn % 2], events_url, last, None)
                turn += 1
                if times and previous is not None:
                    at_cuts.append(times[0] - previous)
                within += [b - a for a, b in zip(times, times[1:], strict=False)]
                previous = times[-1] if times else previous
    finally:
        for proc in procs:
            _kill(proc)
    return at_cuts, within


def _summary(gaps: list[float]) -> str:
    if len(gaps) < 2:
        return f"n={len(gaps)}"
    q = statistics.quantiles(gaps, n=100, method="inclusive")
    return f"n={len(gaps)}  p50 {statistics.median(gaps) * 1e3:.0f} ms  p95 {q[94] * 1e3:.0f} ms  " \
           f"max {max(gaps) * 1e3:.0f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.resume_gap", description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="instance deaths per kind (default 20)")
    parser.add_argument("--cut-streams", type=int, default=6, help="streams read under max_duration_s (default 6)")
    parser.add_argument("--lease-ms", type=int, default=None, help="the log's lease (default: its own, 2000)")
    parser.add_argument("--only", choices=("death", "cut"), default=None, help="one of the two measurements")
    args = parser.parse_args(argv)
    print(f"# {machine()}; lease_ms={args.lease_ms or 'default'}")
    redis = RedisServer()
    url = redis.url if args.lease_ms is None else f"{redis.url}?lease_ms={args.lease_ms}"
    try:
        for name, stream in (("canned answer (deterministic takeover)", CANNED),
                             ("model, takeover='continue'", MODEL)):
            if args.only == "cut":
                break
            redis.ask(b"FLUSHALL")
            print(f"death, {name}: {_summary(death_gaps(url, stream, args.kills))}", flush=True)
        for name, stream in (("canned answer", CANNED), ("model, takeover='continue'", MODEL)):
            if args.only == "death":
                break
            redis.ask(b"FLUSHALL")
            cuts, within = cut_gaps(url, stream, args.cut_streams)
            print(f"max_duration_s=1 cut, {name}: {_summary(cuts)}; between tokens otherwise: {_summary(within)}",
                  flush=True)
    finally:
        redis.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
