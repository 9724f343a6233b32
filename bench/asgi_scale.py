"""Item 9: the ASGI app (``tokenwire.asgi:app``) against sse-starlette's ``EventSourceResponse``, on the same uvicorn.

How this works: both servers are started by the same command line,
``python -m uvicorn <app> --loop uvloop --http httptools`` (access log off,
backlog 4096), on a free loopback port: ours serves the canned answer,
``bench.peer_app`` serves the same frames at the same pace (tokenwire's
timing model, the same seed) from an ``EventSourceResponse``.  Item 5's
client (``bench.scale_client``, one process, kernel receive stamps) opens N
streams of the 277-token answer at 20 ms per token on each, and the
server's CPU seconds over the client's run are read from ``/proc``, as item
5 does.  The two servers take turns, ``ROUNDS`` times, so both see the same
machine; each side's figure is its median round.  The goals: server CPU
per delivered token at most 0.8x the peer's, every stream complete and
contiguous, and ITL p95 at most 1.5x the nominal 20 ms.
"""

from __future__ import annotations

import importlib.util
import sys

from .common import Row, log
from .scale import GOAL_P95, PRODUCER_MS, TOKENS, Step, one_step

__all__ = ["run"]

APPS = {"tokenwire.asgi": "tokenwire.asgi:app", "sse-starlette": "bench.peer_app:app"}
FULL_N, QUICK_N = 300, 20
QUICK_TOKENS = 50
FULL_ROUNDS, QUICK_ROUNDS = 3, 1
GOAL_CPU = 0.8


def _command(app: str, port: int) -> list[str]:
    return [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop",
            "--http", "httptools", "--log-level", "warning", "--no-access-log", "--backlog", "4096"]


def measure(server: str, n: int, tokens: int) -> Step:
    """Start ``server`` on uvicorn, run item 5's client with ``n`` streams, read the server's figures; stop it."""
    return one_step(server, n, tokens, command=lambda port: _command(APPS[server], port))


def per_token_us(step: Step) -> float:
    return float(step.cpu_s / max(1, step.client["tokens_received"]) * 1e6)


def _median(steps: list[Step]) -> Step:
    return sorted(steps, key=per_token_us)[len(steps) // 2]


def run(quick: bool) -> list[Row]:
    if importlib.util.find_spec("sse_starlette") is None or importlib.util.find_spec("uvloop") is None \
            or importlib.util.find_spec("httptools") is None:
        return [Row(9, "ASGI app vs sse-starlette", "not run",
                    notes=("sse-starlette, uvicorn, uvloop and httptools are needed: pip install -e '.[bench]'",))]
    n, tokens = (QUICK_N, QUICK_TOKENS) if quick else (FULL_N, TOKENS)
    rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    runs: dict[str, list[Step]] = {server: [] for server in APPS}
    for _ in range(rounds):
        for server in APPS:
            step = measure(server, n, tokens)
            log(f"bench: item 9: {step.describe()}")
            runs[server].append(step)
    ours, peer = _median(runs["tokenwire.asgi"]), _median(runs["sse-starlette"])
    cpu_ratio = per_token_us(ours) / per_token_us(peer)
    complete = ours.client["complete"] == n and peer.client["complete"] == n
    ours_p95, peer_p95 = ours.p95_ratio, peer.p95_ratio
    notes = (f"both on `python -m uvicorn <app> --loop uvloop --http httptools --no-access-log --backlog 4096`: "
             f"ours tokenwire.asgi:app (the canned answer, GET /stream), the peer bench.peer_app:app "
             f"(EventSourceResponse, the same frames at the same pace); {n} streams of {tokens} tokens at "
             f"{PRODUCER_MS:g} ms (jitter 10%, seed 1), item 5's client; {rounds} round(s) taking turns, "
             "each side's median round by CPU per token",
             *(f"round: {s.describe()}" for server in APPS for s in runs[server]))
    return [
        Row(9, f"ASGI N={n}: server CPU per token, us (peer/ours)", f"{per_token_us(ours):.0f}",
            f"sse-starlette {per_token_us(peer):.0f}", 1 / cpu_ratio, f">= {1 / GOAL_CPU:.2f}x",
            cpu_ratio <= GOAL_CPU and complete, notes),
        Row(9, f"ASGI N={n}: complete | ITL p95/nom. | TTFT p95",
            f"{ours.client['complete']}/{n} | {_fmt(ours_p95)} | {ours.ttft_p95_ms or 0:.0f} ms",
            f"{peer.client['complete']}/{n} | {_fmt(peer_p95)} | {peer.ttft_p95_ms or 0:.0f} ms", None,
            f"all, <= {GOAL_P95}x", complete and ours_p95 is not None and ours_p95 <= GOAL_P95),
    ]


def _fmt(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"
