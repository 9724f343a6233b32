"""Item 13 (M): what ``/metrics`` costs per token, metrics on against off, N=300, both servers.

How this works: the same streams (``GET /stream``, the 277-token answer at
20 ms per token) on ``tokenwire serve`` (counted by default; ``--no-metrics``
off) and on uvicorn (``bench.metrics_apps:on`` and ``:off``: the
``TokenStreams`` of ``tokenwire.asgi:app`` made with ``metrics=True`` and
``False``), uvloop and httptools.  Item 5's client
(``bench.scale_client``) opens N streams, and the server's CPU seconds over
the client's run are read from ``/proc``; a run with metrics on is scraped
once at its end, and its ``tokenwire_tokens_sent_total`` must equal the
tokens the client received (so the counting was on).  The four runs take
turns, ``ROUNDS`` times, so all see the same machine, on and off of each
server back to back in an order flipped every round (a run just after
another server's measured about 1 us a token more, either way); each figure
is the mean of its rounds.  The scrape comes after the CPU figure is read (a
scrape's cost is per scrape, every 15 s or more, not per token; the first
one imports prometheus_client into ``tokenwire serve``).  Beside it, the per-token path alone: ``Metered.token`` (what
a metered connection adds to each token frame) timed against the bare
rendering's ``token``, in ns.  The goal: CPU per delivered token with
metrics at most 1.05x without, every stream complete and contiguous.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
import timeit
import urllib.request
from collections.abc import Callable

from .asgi_scale import per_token_us
from .common import Row, log
from .scale import PRODUCER_MS, TOKENS, Step, one_step

__all__ = ["run"]

FULL_N, QUICK_N = 300, 20
QUICK_TOKENS = 50
FULL_ROUNDS, QUICK_ROUNDS = 8, 1  # full: even, as many rounds with on first as with off first
GOAL_RATIO = 1.05
SERVERS = ("tokenwire serve", "uvicorn TokenStreams()")
SETTINGS = ("on", "off")
_SENT = re.compile(r"^tokenwire_tokens_sent_total (\S+)$", re.M)


def _command(server: str, metrics: str, n: int) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        if server == "tokenwire serve":
            return [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1", "--port", str(port),
                    "--quiet", "--max-live", str(max(n * 2, 256)), "--max-streams", str(max(n * 2, 1024)),
                    *(["--no-metrics"] if metrics == "off" else [])]
        app = f"bench.metrics_apps:{metrics}"
        return [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
                "--loop", "uvloop", "--http", "httptools", "--log-level", "warning", "--no-access-log",
                "--backlog", "4096"]
    return command


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        found = _SENT.search(answer.read().decode())
    return found.group(1) if found else "none"


def measure(server: str, metrics: str, n: int, tokens: int) -> Step:
    """One run: ``server`` started afresh with metrics ``on`` or ``off``, item 5's client reading ``n`` streams."""
    return one_step(f"{server} (metrics {metrics})", n, tokens, command=_command(server, metrics, n),
                    after=_scrape if metrics == "on" else None)


def _mean_us(steps: list[Step]) -> float:
    """The mean CPU per token over the rounds: with the order flipped each round, what running first costs
    cancels out (a median need not)."""
    return sum(per_token_us(s) for s in steps) / len(steps)


def token_path_ns() -> tuple[float, float]:
    """ns per token frame: the bare rendering's ``token``, and the metered connection's (the same, counted)."""
    from tokenwire.core.frames import TokenItem
    from tokenwire.core.rendering import FRAMES
    from tokenwire.endpoints import metering
    from tokenwire.endpoints.metering import Meter
    clock, metering._now = metering._now, itertools.count(10**12, 20_400_000).__next__   # 20.4 ms gaps, as served
    try:
        metered = Meter().rendering(FRAMES, 1, -1, resumed=False)
        items, number = [TokenItem(i, " streaming") for i in range(1, 9)], 25_000     # one sampled gap in 8

        def each(token: Callable[[TokenItem], bytes]) -> float:
            return min(timeit.repeat(lambda: [token(item) for item in items], number=number, repeat=9)) / (
                number * len(items)) * 1e9

        bare, counted = each(FRAMES.token), each(metered.token)
    finally:
        metering._now = clock
    return bare, counted


def run(quick: bool) -> list[Row]:
    if importlib.util.find_spec("uvloop") is None or importlib.util.find_spec("httptools") is None \
            or importlib.util.find_spec("prometheus_client") is None:
        return [Row(13, "metrics on vs off", "not run",
                    notes=("uvicorn, uvloop, httptools and prometheus_client are needed: "
                           "pip install -e '.[bench,metrics]'",))]
    n, tokens = (QUICK_N, QUICK_TOKENS) if quick else (FULL_N, TOKENS)
    rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    runs: dict[tuple[str, str], list[Step]] = {(s, m): [] for s in SERVERS for m in SETTINGS}
    for round_ in range(rounds):
        # Each server's on and off runs back to back, their order flipped every round: whatever running
        # first or second after another server costs falls on both alike.
        for key in [(s, m) for s in SERVERS for m in (SETTINGS if round_ % 2 == 0 else SETTINGS[::-1])]:
            step = measure(*key, n, tokens)
            log(f"bench: item 13: {step.describe()}")
            runs[key].append(step)
    bare, counted = token_path_ns()
    notes = (f"{n} streams of {tokens} tokens at {PRODUCER_MS:g} ms (jitter 10%, seed 1), GET /stream; metrics on: "
             f"tokenwire serve as it is, off: serve --no-metrics; on uvicorn (uvloop, httptools) "
             f"bench.metrics_apps:on and :off, TokenStreams(metrics=True) and (metrics=False); "
             f"{rounds} round(s), the four runs taking turns, on and off back to back in an order flipped each round, "
             f"each figure the mean of its rounds' CPU per token; a run with metrics on is scraped at its end, "
             f"after its CPU figure is read",
             f"the per-token path alone, 20.4 ms apart, tokens 1-8 over and over: a token frame {bare:.0f} ns bare, "
             f"{counted:.0f} ns counted "
             f"(Metered.token: +{counted - bare:.0f} ns a token, "
             f"{(counted - bare) / 10 / _mean_us(runs[(SERVERS[0], 'off')]):.1f}% of serve's CPU per "
             f"token without metrics)",
             *(f"round: {s.describe()}" + (f"; scraped tokens_sent_total {s.client['after']}"
                                           if "after" in s.client else "")
               for steps in runs.values() for s in steps))
    rows = []
    for server in SERVERS:
        on, off = _mean_us(runs[(server, "on")]), _mean_us(runs[(server, "off")])
        ratio = on / off
        complete = all(s.client["complete"] == n for m in SETTINGS for s in runs[(server, m)])
        counted_all = all(float(s.client.get("after", "nan")) == s.client["tokens_received"]
                          for s in runs[(server, "on")])
        rows.append(Row(13, f"{server} N={n}: CPU per token, us (metrics on / off)", f"on {on:.1f}",
                        f"off {off:.1f}", ratio, f"<= {GOAL_RATIO}x",
                        ratio <= GOAL_RATIO and complete and counted_all,
                        notes if server == SERVERS[0] else ()))
        least = {m: min(s.client["complete"] for s in runs[(server, m)]) for m in SETTINGS}
        rows.append(Row(13, f"{server} N={n}: complete, every round (on | off); scraped tokens sent = received",
                        f"{least['on']}/{n}", f"{least['off']}/{n}", None, "all", complete and counted_all))
    return rows
