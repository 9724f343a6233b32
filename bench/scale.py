"""Item 5: server scale, ``tokenwire serve`` vs sse-starlette on uvicorn, over loopback.

How this works: for each server and each N (stepping up), a fresh server
process starts on a free loopback port, the client process
(``bench.scale_client``, the same for every server) opens N streams of the
277-token answer paced at 20 ms per token, and the server's CPU seconds
(``utime + stime`` from ``/proc/PID/stat``) and peak RSS (``VmHWM`` from
``/proc/PID/status``) are read when the client is done; then the server is
stopped and its context switches over its life read from ``wait4``.  A
step holds when every stream is complete and contiguous, the pooled ITL
p95 is at most 1.5x the nominal 20 ms (the timing model's jitter of +-10%
is in every server's schedule, so a perfect server shows about 1.09x) and
TTFT p95 is at most 1 s.  A failing step is run once more (the machine
may be shared) and fails only if that run fails too.  Each server stops
stepping at its first failing N, and the whole item stops stepping when
its time budget is spent.  At
each N the servers run one after the other, so all see the same machine.
File-descriptor
limits are raised to the hard limit in the client and, through
``preexec_fn``, in the servers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .common import ROOT, Row, env_with_root, log

__all__ = ["one_step", "query", "run"]

TOKENS = 277
PRODUCER_MS = 20.0
GOAL_P95 = 1.5
# A stream that waits longer than this for its first token is not being
# served alongside the others but queued behind them (an overloaded server
# can keep every ITL on pace by starting streams late); nominal TTFT is
# 32 ms, and the client opens 5,000 connections a second.
MAX_TTFT_P95_MS = 1000.0
FULL_STEPS = (25, 50, 100, 150, 200, 300, 400, 500, 750, 1000, 1500, 2000, 3000)
QUICK_STEPS = (10, 40)
QUICK_TOKENS = 50
FULL_BUDGET_S = 420.0
QUICK_BUDGET_S = 25.0
START_TIMEOUT_S = 20.0


@dataclass
class Step:
    server: str
    n: int
    client: dict[str, Any]
    cpu_s: float
    peak_rss: int
    switches: int

    @property
    def p95_ratio(self) -> float | None:
        itl = self.client.get("itl_ms")
        return None if not itl else itl["95"] / PRODUCER_MS

    @property
    def ttft_p95_ms(self) -> float | None:
        ttft = self.client.get("ttft_ms")
        return None if not ttft else float(ttft["95"])

    @property
    def held(self) -> bool:
        ratio, ttft = self.p95_ratio, self.ttft_p95_ms
        return (self.client["complete"] == self.n and ratio is not None and ratio <= GOAL_P95
                and ttft is not None and ttft <= MAX_TTFT_P95_MS)

    def describe(self) -> str:
        c = self.client
        ratio = self.p95_ratio
        ttft = self.ttft_p95_ms
        text = (f"{self.server} N={self.n}: {c['complete']}/{self.n} complete+contiguous, ITL p95 "
                f"{'-' if ratio is None else f'{ratio:.2f}x'}, TTFT p95 {'-' if ttft is None else f'{ttft:.0f} ms'}, "
                f"server CPU {self.cpu_s:.1f} s, "
                f"({self.cpu_s / max(1, c['tokens_received']) * 1e6:.0f} us and "
                f"{self.switches / max(1, c['tokens_received']):.1f} context switches per token), "
                f"peak RSS {self.peak_rss / 2**20:.0f} MiB, client CPU {c['client_cpu_s']:.1f} s "
                f"of {c['client_wall_s']:.1f} s")
        if c["client_cpu_s"] > 0.8 * c["client_wall_s"]:
            text += " (the client was near one core: its limit, not only the server's)"
        if c["complete"] < self.n:
            text += (f"; contiguous {c['contiguous']}/{self.n}, tokens received {c['tokens_received']:,} of "
                     f"{self.n * c.get('tokens', TOKENS):,}")
        if c["errors"] or c["timed_out"]:
            text += f"; errors {c['errors']}, timed out {c['timed_out']}"
        return text + ("" if self.held else "  <- fails")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _command(server: str, port: int, n: int) -> list[str]:
    if server == "tokenwire":
        return [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1", "--port", str(port), "--quiet",
                "--max-live", str(max(n * 2, 256)), "--max-streams", str(max(n * 2, 1024))]
    return [sys.executable, "-m", "bench.peer_app", str(port)]


def query(tokens: int) -> str:
    """The stream's parameters: the canned answer's ``tokens`` at 20 ms, block, buffer 4, seed 1."""
    return f"scenario=block&tokens={tokens}&producer_ms={PRODUCER_MS:g}&buffer=4&seed=1"


def _path(tokens: int) -> str:
    return f"/stream?{query(tokens)}"


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the server did not listen on port {port} within {START_TIMEOUT_S} s")


def _proc_figures(pid: int) -> tuple[float, int]:
    """Return (CPU seconds, peak RSS bytes) of a live process."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    peak = 0
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
    return cpu, peak


def _switches(pid: int) -> int:
    """Context switches so far of every live thread of ``pid``."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status", encoding="ascii") as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches:" in line)
        except OSError:
            pass
    return total


def _stop(proc: subprocess.Popen[bytes]) -> int:
    """Stop the server; returns its context switches over its life (all threads, from wait4; 0 if already reaped)."""
    if proc.returncode is not None:
        return 0
    proc.terminate()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return int(usage.ru_nvcsw + usage.ru_nivcsw)
        time.sleep(0.01)
    proc.kill()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return int(usage.ru_nvcsw + usage.ru_nivcsw)


def one_step(server: str, n: int, tokens: int, attempts: int = 3,
             command: Callable[[int], list[str]] | None = None,
             beside: Callable[[int], Callable[[], str]] | None = None, path: str | None = None,
             after: Callable[[int], str] | None = None, cwd: str | None = None) -> Step:
    """Start ``server``, run the client with ``n`` streams, read the server's figures, stop it.

    A server that exits before it listens (the free port taken in between)
    is started again on another port, up to ``attempts`` times.  ``command``
    (given the port) starts a server this module does not know (item 9's).
    ``beside`` (given the port) starts other load while the streams run and
    returns what stops it and says what it did (added to the step's client
    figures as ``beside``).  ``path``: what the client reads (default: ``GET /stream`` with the
    parameters; ``/chat?...`` reads the chat protocol, ``bench.scale_client``).  ``after`` (given the
    port) asks the server something once its figures are read, before it stops (added as ``after``).
    ``cwd``: where the server runs (default the repository root); a ``python -m`` server imports from
    there first (item 15 runs a baseline commit's worktree so).
    """
    for attempt in range(attempts):
        try:
            return _one_step(server, n, tokens, command, beside, path or _path(tokens), after, cwd)
        except _NotListening:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


class _NotListening(RuntimeError):
    pass


def _one_step(server: str, n: int, tokens: int, command: Callable[[int], list[str]] | None,
              beside: Callable[[int], Callable[[], str]] | None, path: str,
              after: Callable[[int], str] | None = None, cwd: str | None = None) -> Step:
    port = _free_port()
    errors = tempfile.TemporaryFile()
    proc = subprocess.Popen(command(port) if command else _command(server, port, n), cwd=cwd or ROOT,
                            env=env_with_root(), stdout=subprocess.DEVNULL, stderr=errors, preexec_fn=_raise_nofile)
    try:
        try:
            _wait_listening(port, proc)
        except RuntimeError as exc:
            errors.seek(0)
            tail = errors.read().decode(errors="replace").strip().splitlines()[-1:]
            raise _NotListening(f"{exc}: {tail[0] if tail else 'no stderr'}") from None
        cpu0, _ = _proc_figures(proc.pid)
        switches0 = _switches(proc.pid)
        timeout = tokens * PRODUCER_MS / 1e3 * 3 + n / 500 + 10
        stop_beside = beside(port) if beside is not None else None
        try:
            out = subprocess.run([sys.executable, "-m", "bench.scale_client", str(port), path, str(n),
                                  str(tokens), str(timeout)], cwd=ROOT, env=env_with_root(), capture_output=True,
                                 text=True, timeout=timeout + 60, check=True)
        finally:
            said = stop_beside() if stop_beside is not None else None
        cpu1, peak = _proc_figures(proc.pid)
        answered = after(port) if after is not None else None
    finally:
        switches = _stop(proc)
        errors.close()
    client = json.loads(out.stdout)
    if said is not None:
        client["beside"] = said
    if answered is not None:
        client["after"] = answered
    return Step(server, n, client, cpu1 - cpu0, peak, switches - switches0)


def _ladders(servers: tuple[str, ...], steps: tuple[int, ...], tokens: int,
             deadline: float) -> tuple[dict[str, list[Step]], list[str]]:
    """Step N up for every server in turn at each N (side by side in time); each stops at its first failure."""
    done: dict[str, list[Step]] = {s: [] for s in servers}
    notes: list[str] = []
    running = list(servers)
    for n in steps:
        if not running:
            break
        if time.monotonic() > deadline:
            notes.append(f"stopped stepping at N={n} ({', '.join(running)} still holding): time budget spent")
            return done, notes
        for server in list(running):
            try:
                step = one_step(server, n, tokens)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                notes.append(f"{server} N={n}: could not run ({type(exc).__name__}: {exc}); its ladder stops here")
                log(f"bench: item 5: {notes[-1]}")
                running.remove(server)
                continue
            log(f"bench: item 5: {step.describe()}")
            if not step.held:
                again = one_step(server, n, tokens)
                log(f"bench: item 5: again: {again.describe()}")
                step = again if again.held or _better(again, step) else step
            done[server].append(step)
            if not step.held:
                running.remove(server)
    notes += [f"{s}: held every N tried (up to {steps[-1]})" for s in running]
    return done, notes


def _better(a: Step, b: Step) -> bool:
    """True if failing step ``a`` came closer to holding than ``b`` (more complete, then lower ITL p95)."""
    closer = (a.client["complete"], -(a.p95_ratio or float("inf")))
    return closer > (b.client["complete"], -(b.p95_ratio or float("inf")))


def _fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _largest(steps: list[Step]) -> int:
    held = [s.n for s in steps if s.held]
    return max(held) if held else 0


def run(quick: bool) -> list[Row]:
    if importlib.util.find_spec("sse_starlette") is None or importlib.util.find_spec("uvicorn") is None:
        return [Row(5, "server scale", "not run", notes=("sse-starlette and uvicorn are needed: "
                                                        "pip install -e '.[bench]'",))]
    steps, tokens = (QUICK_STEPS, QUICK_TOKENS) if quick else (FULL_STEPS, TOKENS)
    budget = QUICK_BUDGET_S if quick else FULL_BUDGET_S
    deadline = time.monotonic() + budget
    ladders, ladder_notes = _ladders(("tokenwire", "sse-starlette"), steps, tokens, deadline)
    ours, peer = ladders["tokenwire"], ladders["sse-starlette"]
    n_ours, n_peer = _largest(ours), _largest(peer)
    peer_stack = ", ".join(f"{m} {'installed' if importlib.util.find_spec(m) else 'absent'}"
                           for m in ("uvloop", "httptools"))
    notes = [f"peer: sse-starlette EventSourceResponse on uvicorn (loop and http 'auto': {peer_stack}); tokenwire: "
             "`python -m tokenwire serve --quiet --max-live 2N --max-streams 2N` (one event loop, one thread, "
             "uvloop when installed)",
             f"{tokens} tokens at {PRODUCER_MS:g} ms (jitter 10%, seed 1) per stream, N streams at once over "
             "loopback, read by one client process for every server (one selectors loop, tokenwire's Decoder, "
             "kernel receive stamps); a step holds when all N are complete and contiguous, ITL p95 <= "
             f"{GOAL_P95}x nominal and TTFT p95 <= {MAX_TTFT_P95_MS / 1e3:g} s (no stream queued behind the others); "
             f"steps {', '.join(map(str, steps))}; a failing step is run once more and fails only if that "
             "run fails too (the machine may be shared), the better run is shown",
             *(s.describe() for s in ours + peer), *ladder_notes]
    # The peer's limit is known only if it failed a step; until then no ratio can say "2x".
    peer_broke = bool(peer) and not peer[-1].held

    def verdict(n: int) -> bool | None:
        return n >= 2 * n_peer if peer_broke and n_peer else None

    rows = [Row(5, "server scale: largest N held", f"{n_ours}", f"sse-starlette {n_peer}",
                n_ours / n_peer if n_peer else None, ">= 2x", verdict(n_ours), tuple(notes))]
    cpu_n = 300 if not quick else steps[-1]
    a = next((s for s in ours if s.n == cpu_n), None)
    b = next((s for s in peer if s.n == cpu_n), None)
    if a is not None and b is not None and a.cpu_s and b.cpu_s:
        rows.append(Row(5, f"server CPU per token at N={cpu_n} (ours / peer)", f"{a.cpu_s:.1f} s",
                        f"sse-starlette {b.cpu_s:.1f} s", a.cpu_s / b.cpu_s, "<= 0.6x", a.cpu_s / b.cpu_s <= 0.6,
                        ("the same tokens delivered by both; CPU is the server process's utime + stime",)))
    big = next((s for s in ours if s.n == 1000), None)
    big_note: tuple[str, ...] = ()
    if big is None and not quick:
        try:
            big = one_step("tokenwire", 1000, tokens)      # the ladder stopped below: measure N=1000 anyway
            big_note = (f"N=1000 measured on its own: {big.describe()}",)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            big_note = (f"N=1000 could not run: {type(exc).__name__}: {exc}",)
    if big is not None:
        ttft = big.ttft_p95_ms
        rows.append(Row(5, "N=1000: all complete, TTFT p95 <= 1 s", f"{big.client['complete']}/1000, TTFT p95 "
                        f"{_fmt_ms(ttft)}", "", None, "all, <= 1 s",
                        big.client["complete"] == 1000 and ttft is not None and ttft <= MAX_TTFT_P95_MS, big_note))
    for n in sorted({s.n for s in ours} & {s.n for s in peer}):
        a = next(s for s in ours if s.n == n)
        b = next(s for s in peer if s.n == n)
        rows.append(Row(5, f"N={n}: ITL p95/nom. | CPU s | peak MiB (ratio: CPU)",
                        f"{_fmt(a.p95_ratio)} | {a.cpu_s:.1f} | {a.peak_rss / 2**20:.0f}",
                        f"{_fmt(b.p95_ratio)} | {b.cpu_s:.1f} | {b.peak_rss / 2**20:.0f}",
                        (b.cpu_s / a.cpu_s) if a.cpu_s else None))
    return rows


def _fmt(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"
