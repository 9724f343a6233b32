"""Servers measured side by side: interleaved rounds of item 5's step, medians, ratio rows (items 14-17).

How this works: a ``Server`` names a command line (given the port), where
it runs, what the client reads and how many entries a stream holds.
``rounds`` runs item 5's step (``bench.scale.one_step``: a fresh server
process on a free loopback port, ``bench.scale_client`` with N streams,
the server's utime + stime from ``/proc`` over the client's run) for every
server in turn, then again: round 1 of every server, then round 2, each
even round in the reverse order, so that no server always runs first or
always right after the same one.  Each figure is the median of its rounds;
a ratio counts only when every round of both sides delivered every stream
complete and contiguous.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .asgi_scale import _command as uvicorn_command
from .common import ROOT, Row, log
from .scale import PRODUCER_MS, Step, one_step
from .scale import _command as item5_command

__all__ = ["git", "tree_state", "tree_note", "Server", "Rounds", "rounds", "serve", "uvicorn", "floor_protocol",
           "per_entry_us", "ratio_row", "fmt_rounds", "PRODUCER_MS"]


def git(*args: str) -> subprocess.CompletedProcess[str]:
    """``git -C <repository root> args...``, its output captured."""
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, timeout=120)


def tree_state() -> str:
    """The working tree measured as "now": its HEAD and how many package files differ from it."""
    if shutil.which("git") is None:
        return "the working tree"
    head = git("rev-parse", "--short", "HEAD").stdout.strip()
    changed = [line for line in git("status", "--porcelain", "--", "tokenwire").stdout.splitlines() if line]
    if not changed:
        return f"the working tree at {head} (no uncommitted change under tokenwire/)"
    diff = hashlib.sha1(git("diff", "HEAD", "--", "tokenwire").stdout.encode()).hexdigest()[:8]
    return f"the working tree at {head} with {len(changed)} uncommitted file(s) under tokenwire/ (diff {diff})"


def tree_note(before: str) -> str:
    """``before`` (``tree_state()`` at an item's start), and what it became if the tree changed since."""
    after = tree_state()
    return before if after == before else f"{before} at the start, but {after} at the end (it changed meanwhile)"


@dataclass(frozen=True)
class Server:
    """One server as measured: ``name`` as printed, ``command`` given the port.

    cwd: where it runs (None: the repository root; a ``python -m`` server
    imports from there first); path: what the client reads (None: item 5's
    ``GET /stream``); count: the entries a stream holds, what the client
    expects (None: the tokens asked for).
    """

    name: str
    command: Callable[[int], list[str]]
    cwd: str | None = None
    path: str | None = None
    count: int | None = None


def serve(name: str, n: int, cwd: str | None = None, path: str | None = None, count: int | None = None) -> Server:
    """``python -m tokenwire serve`` as item 5 starts it (``--max-live`` and ``--max-streams`` 2N)."""
    return Server(name, lambda port: item5_command("tokenwire", port, n), cwd, path, count)


def uvicorn(name: str, app: str, cwd: str | None = None, path: str | None = None, count: int | None = None) -> Server:
    """``python -m uvicorn <app>`` as item 9 starts it (uvloop, httptools, no access log, backlog 4096)."""
    return Server(name, lambda port: uvicorn_command(app, port), cwd, path, count)


def floor_protocol() -> Server:
    """``python -m bench.floor_protocol``: a bare asyncio Protocol on uvloop, the floor of ``tokenwire serve``."""
    return Server("bench.floor_protocol", lambda port: [sys.executable, "-m", "bench.floor_protocol", str(port)])


def per_entry_us(step: Step) -> float:
    """Server CPU per delivered token (per entry when the client counted entries), in microseconds."""
    return float(step.cpu_s / max(1, step.client["tokens_received"]) * 1e6)


@dataclass
class Rounds:
    """What ``rounds`` measured: each server's steps in round order, and why a server could not run."""

    n: int
    steps: dict[str, list[Step]]
    failed: dict[str, str]

    def ran(self, name: str) -> bool:
        return bool(self.steps.get(name)) and name not in self.failed

    def median_us(self, name: str) -> float:
        return float(statistics.median(per_entry_us(s) for s in self.steps[name]))

    def complete(self, name: str) -> bool:
        """Every round delivered every stream complete and contiguous."""
        return self.ran(name) and all(s.client["complete"] == self.n for s in self.steps[name])

    def completes(self, name: str) -> str:
        """The complete streams, e.g. ``300/300`` (every round) or ``300, 298, 300 of 300`` (each round's)."""
        got = [s.client["complete"] for s in self.steps.get(name, [])]
        if len(set(got)) <= 1:
            return f"{got[0] if got else 0}/{self.n}"
        return f"{', '.join(map(str, got))} of {self.n}"

    def notes(self) -> list[str]:
        out = [f"round {i + 1}: {s.describe()}" for name, steps in self.steps.items() for i, s in enumerate(steps)]
        return out + [f"{name}: could not run: {why}" for name, why in self.failed.items()]


def rounds(item: int, servers: Sequence[Server], n: int, tokens: int, count: int,
           deadline: float | None = None) -> Rounds:
    """Run ``count`` interleaved rounds of ``servers`` at ``n`` streams of ``tokens`` tokens.

    A round after the first is not started once ``deadline`` (monotonic) is
    passed.  A server that cannot run (it does not listen, the client
    fails) is dropped from the later rounds and its reason kept.
    """
    done = Rounds(n, {s.name: [] for s in servers}, {})
    for r in range(count):
        if r and deadline is not None and time.monotonic() > deadline:
            break
        order = servers if r % 2 == 0 else list(reversed(servers))
        for server in order:
            if server.name in done.failed:
                continue
            try:
                step = one_step(server.name, n, server.count or tokens, command=server.command, path=server.path,
                                cwd=server.cwd)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                done.failed[server.name] = f"{type(exc).__name__}: {exc}"
                log(f"bench: item {item}: {server.name} N={n}: could not run: {done.failed[server.name]}")
                continue
            log(f"bench: item {item}: round {r + 1}: {step.describe()} = {per_entry_us(step):.1f} us per entry")
            done.steps[server.name].append(step)
    return done


def fmt_rounds(done: Rounds, name: str) -> str:
    """A server's CPU per entry, every round, e.g. ``52.9 (54.0, 50.8, 52.9)``."""
    values = [per_entry_us(s) for s in done.steps[name]]
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({', '.join(f'{v:.1f}' for v in values)})"


def ratio_row(item: int, name: str, done: Rounds, ours: str, theirs: str, limit: float,
              notes: tuple[str, ...] = ()) -> Row:
    """A row of ``ours`` / ``theirs`` median CPU per entry against ``<= limit``.

    Not met unless every round of both delivered every stream complete and
    contiguous; a side that did not run gives a row saying so.
    """
    if not (done.ran(ours) and done.ran(theirs)):
        missing = ", ".join(s for s in (ours, theirs) if not done.ran(s))
        return Row(item, name, "not run", "", None, f"<= {limit:g}x", None, (f"{missing}: did not run",))
    a, b = done.median_us(ours), done.median_us(theirs)
    complete = done.complete(ours) and done.complete(theirs)
    more = () if complete else (f"{name}: not every stream complete and contiguous ({ours} "
                                f"{done.completes(ours)}, {theirs} {done.completes(theirs)}): not met",)
    return Row(item, name, f"{a:.1f} us", f"{theirs} {b:.1f} us", a / b, f"<= {limit:g}x",
               a / b <= limit and complete, notes + more)


def print_beside_floor(done: Rounds, servers: Sequence[Server], tokens: int, count: int) -> int:
    """Print each server's CPU per token and its ratio to the last, the floor (``bench.floor_lane``,
    ``bench.compiled_lane``); returns 0 if every round of every server delivered every stream whole, else 1."""
    floor = done.median_us(servers[-1].name) if done.ran(servers[-1].name) else None
    for server in servers:
        if not done.ran(server.name):
            print(f"{server.name}: did not run: {done.failed.get(server.name)}")
            continue
        us = [per_entry_us(s) for s in done.steps[server.name]]
        median = statistics.median(us)
        than = f", {median / floor:.2f}x the floor" if floor else ", no ratio (the floor's CPU read 0 clock ticks)"
        print(f"{server.name}: {median:.1f} us a token (rounds {', '.join(f'{u:.1f}' for u in us)}){than}; "
              f"complete {done.completes(server.name)}")
    print(f"N={done.n}, {tokens} tokens at 20 ms, {count} interleaved rounds; load average "
          f"{os.getloadavg()[0]:.2f} at the end")
    return 0 if all(done.complete(s.name) for s in servers) else 1
