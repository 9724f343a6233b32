"""Item 12 (O): CPU per token of relaying an OpenAI-compatible upstream: ``tokenwire proxy`` vs a plain relay.

How this works: one upstream (``bench.upstream_app``, uvicorn) streams the
277-token answer at 20 ms per token to every relay, each a server process
of its own on uvicorn (uvloop, httptools), and item 5's client
(``bench.scale_client``) opens N=100 streams through it:

- ``tokenwire proxy`` (the memory log: every token logged before it is
  sent) read as OpenAI's chat chunks (``POST /v1/chat/completions``);
- the same proxy read as tokenwire's own frames (``GET /stream``);
- a plain relay (``bench.plain_relay``: FastAPI's ``StreamingResponse``
  over httpx, the upstream's bytes passed through, nothing kept).

And, with no upstream, tokenwire's OpenAI chunks against its own frames on
``tokenwire serve``'s canned answer (the same stream rendered two ways).
The relay's CPU seconds over the client's run are read from ``/proc``.  The
runs take turns, ``ROUNDS`` times; each figure is its median round.  The
goals: the proxy at most 1.5x the plain relay's CPU per token, and OpenAI's
chunks at most 1.3x tokenwire's frames, every stream complete.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable

from .asgi_scale import per_token_us
from .common import ROOT, Row, env_with_root, log
from .scale import PRODUCER_MS, TOKENS, Step, _free_port, _wait_listening, one_step, query

__all__ = ["run"]

FULL_N, QUICK_N = 100, 10
QUICK_TOKENS = 50
FULL_ROUNDS, QUICK_ROUNDS = 3, 1
PROXY_GOAL, CHUNKS_GOAL = 1.5, 1.3
RUNS = ("proxy (OpenAI chunks)", "proxy (frames)", "plain relay", "serve (OpenAI chunks)", "serve (frames)")


def _uvicorn(target: str, port: int, *env: str) -> list[str]:
    return ["env", *env, sys.executable, "-m", "uvicorn", target, "--host", "127.0.0.1", "--port", str(port),
            "--loop", "uvloop", "--http", "httptools", "--log-level", "warning", "--no-access-log",
            "--backlog", "4096"]


def _command(run: str, upstream: str, n: int) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        if run.startswith("proxy"):
            return [sys.executable, "-m", "tokenwire", "proxy", "--upstream", upstream, "--model", "bench",
                    "--host", "127.0.0.1", "--port", str(port), "--quiet", "--max-live", str(max(n * 2, 256)),
                    "--max-streams", str(max(n * 2, 1024))]
        if run == "plain relay":
            return _uvicorn("bench.plain_relay:app", port, f"BENCH_UPSTREAM={upstream}")
        return [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1", "--port", str(port), "--quiet",
                "--max-live", str(max(n * 2, 256)), "--max-streams", str(max(n * 2, 1024))]
    return command


def _path(run: str, tokens: int) -> str:
    upstream = f"tokens={tokens}&producer_ms={PRODUCER_MS:g}"
    if run.startswith("serve"):
        return f"/v1/chat/completions?{query(tokens)}" if "OpenAI" in run else f"/stream?{query(tokens)}"
    # The proxy hands the upstream no body fields but the sampling ones: the upstream streams its default length.
    return "/stream?prompt=hi" if run == "proxy (frames)" else f"/v1/chat/completions?{upstream}"


def _median(steps: list[Step]) -> Step:
    return sorted(steps, key=per_token_us)[len(steps) // 2]


def _ratio_row(label: str, over: Step, under: Step, goal: float, n: int, notes: tuple[str, ...] = ()) -> Row:
    ratio = per_token_us(over) / per_token_us(under)
    complete = over.client["complete"] == n and under.client["complete"] == n
    return Row(12, label, f"{per_token_us(over):.0f}", f"{per_token_us(under):.0f}", ratio, f"<= {goal}x",
               ratio <= goal and complete, notes)


def run(quick: bool) -> list[Row]:
    needed = ("uvloop", "httptools", "fastapi", "httpx", "uvicorn")
    if any(importlib.util.find_spec(name) is None for name in needed):
        return [Row(12, "tokenwire proxy vs a plain relay", "not run",
                    notes=(f"{', '.join(needed)} are needed: pip install -e '.[bench]'",))]
    n, rounds = (QUICK_N, QUICK_ROUNDS) if quick else (FULL_N, FULL_ROUNDS)
    port = _free_port()
    tokens = QUICK_TOKENS if quick else TOKENS     # every run's answer, the upstream's included
    upstream = subprocess.Popen(_uvicorn("bench.upstream_app:app", port, f"BENCH_UPSTREAM_TOKENS={tokens}"),
                                cwd=ROOT, env=env_with_root(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port, upstream)  # type: ignore[arg-type]
        runs: dict[str, list[Step]] = {name: [] for name in RUNS}
        for _ in range(rounds):
            for name in RUNS:
                step = one_step(name, n, tokens, command=_command(name, f"http://127.0.0.1:{port}/v1", n),
                                path=_path(name, tokens))
                log(f"bench: item 12: {step.describe()}")
                runs[name].append(step)
    finally:
        upstream.terminate()
        upstream.wait(10)
    median = {name: _median(steps) for name, steps in runs.items()}
    notes = (f"N={n} streams of {tokens} tokens at {PRODUCER_MS:g} ms from one upstream (bench.upstream_app) for the "
             f"relays; the relays and the proxy on uvicorn with uvloop and httptools; tokenwire proxy on its memory "
             f"log; {rounds} round(s), the runs taking turns, each figure its median round by server CPU per "
             f"delivered token (us)", *(f"round: {s.describe()}" for steps in runs.values() for s in steps))
    return [
        _ratio_row(f"N={n}: tokenwire proxy (OpenAI chunks) / plain relay, CPU us per token",
                   median["proxy (OpenAI chunks)"], median["plain relay"], PROXY_GOAL, n, notes),
        _ratio_row(f"N={n}: tokenwire proxy, its frames / plain relay", median["proxy (frames)"],
                   median["plain relay"], PROXY_GOAL, n),
        _ratio_row(f"N={n}: tokenwire proxy, OpenAI chunks / its frames", median["proxy (OpenAI chunks)"],
                   median["proxy (frames)"], CHUNKS_GOAL, n),
        _ratio_row(f"N={n}: tokenwire serve, OpenAI chunks / its frames", median["serve (OpenAI chunks)"],
                   median["serve (frames)"], CHUNKS_GOAL, n),
    ]
