"""Issue 17: the memory log against the Redis log, side by side, for ``tokenwire serve`` and the ASGI app on uvicorn.

How this works: for each N (300, then 1,000) and each server (``tokenwire
serve``, then ``uvicorn tokenwire.asgi:app --loop uvloop --http httptools``),
the same server runs twice in a row, once on the memory log and once on a
fresh ``redis-server`` of its own (``--log redis://...`` for serve,
``TOKENWIRE_LOG_URL`` for the ASGI app), and item 5's client
(``bench.scale_client``: N streams of the 277-token answer at 20 ms a token,
buffer 4, kernel receive stamps) reads it.  The server's CPU seconds come
from ``/proc/<pid>/stat`` over the client's run (item 5's ``one_step``); on
Redis, so do Redis's own, and Redis's connections are sampled with ``CLIENT
LIST`` every 0.2 s meanwhile (the most seen, less the sampler's own), and
Redis's script calls are counted from ``INFO commandstats`` (a few per
stream, and a round's appends are plain ``XADD``s: tokens / script calls
says how few calls a token costs besides its own ``XADD``).  The
goals are issue 17's: every stream complete and contiguous, ITL p95 at most
1.5x the nominal 20 ms, TTFT p95 at most 1 s, server CPU per token on Redis
at most 1.5x the same server's on memory, Redis CPU per token at most 4 us,
at most 8 connections; at N=1,000 on Redis, every stream complete.

``python -m bench.redis_scale [--quick] [--n 300,1000] [--pair N]``; the
two-process run (streams cut once and resumed on the other process) is
``bench.redis_pair``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .common import Row, format_table, log, machine
from .scale import GOAL_P95, MAX_TTFT_P95_MS, PRODUCER_MS, TOKENS, Step, _free_port, one_step

__all__ = ["RedisServer", "command", "paired", "run"]

FULL_N, QUICK_N = (300, 1000), (40,)
QUICK_TOKENS = 50
GOAL_CPU_RATIO = 1.5
GOAL_REDIS_US = 4.0
GOAL_CONNECTIONS = 8
SAMPLE_S = 0.2
IDLE_S = 2.0     # how long Redis's upkeep is measured, idle, before a run (``idle_rate``)


def idle_rate(cpu_s: Callable[[], float], seconds: float = IDLE_S) -> float:
    """CPU seconds a second that ``cpu_s`` (a Redis's ``run_s``, or several nodes' summed) spends with nothing
    asked of it, over ``seconds`` before a run: its own upkeep (``serverCron``; a cluster's bus and
    ``clusterCron`` too), which the run's CPU per token includes and which does not grow with the tokens."""
    before = cpu_s()
    time.sleep(seconds)
    return (cpu_s() - before) / seconds


class RedisServer:
    """A ``redis-server`` of the bench's own on a free loopback port, nothing on disk."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--maxclients", "10000", "--loglevel", "warning", "--logfile", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if self.ask(b"PING").startswith(b"+PONG"):
                    return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def ask(self, command: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(command + b"\r\n")
            data = sock.recv(1 << 20)
            if data.startswith(b"$"):
                size = int(data.split(b"\r\n", 1)[0][1:])
                while len(data.split(b"\r\n", 1)[1]) < size:
                    data += sock.recv(1 << 20)
            return data

    def clients(self) -> int:
        """Connections Redis holds now, less the one asking."""
        return self.ask(b"CLIENT LIST").count(b" laddr=") - 1

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def run_s(self) -> float:
        """CPU seconds so far, every thread's, to the nanosecond (``/proc/<pid>/task/*/schedstat``): what
        ``idle_rate`` reads, where ``cpu_s``'s 10 ms ticks are too coarse for a few seconds of near idleness."""
        total = 0
        for task in os.listdir(f"/proc/{self.proc.pid}/task"):
            with open(f"/proc/{self.proc.pid}/task/{task}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[0])
        return total / 1e9

    def rounds(self) -> int:
        """Script calls since the stats were reset: every append round, and a few calls per stream."""
        for line in self.ask(b"INFO commandstats").decode().split("\r\n"):
            if line.startswith("cmdstat_evalsha:"):
                return int(line.split("calls=", 1)[1].split(",", 1)[0])
        return 0

    def watch(self) -> Callable[[], str]:
        """Start sampling connections and CPU; returns what stops it and gives the figures as JSON."""
        idle = idle_rate(self.run_s)
        self.ask(b"CONFIG RESETSTAT")
        cpu0, most, stop, began = self.cpu_s(), [0], threading.Event(), time.monotonic()

        def sample() -> None:
            while not stop.wait(SAMPLE_S):
                most[0] = max(most[0], self.clients())
        thread = threading.Thread(target=sample, daemon=True)
        thread.start()

        def done() -> str:
            stop.set()
            thread.join(5)
            return json.dumps({"redis_cpu_s": self.cpu_s() - cpu0, "connections": most[0], "rounds": self.rounds(),
                               "idle_cpu_s": idle * (time.monotonic() - began)})
        return done

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _serve(log_url: str, n: int) -> Callable[[int], list[str]]:
    return lambda port: [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1", "--port", str(port),
                         "--quiet", "--max-live", str(max(n * 2, 256)), "--max-streams", str(max(n * 2, 1024)),
                         "--log", log_url]


def _asgi(log_url: str, n: int) -> Callable[[int], list[str]]:
    return lambda port: ["env", f"TOKENWIRE_LOG_URL={log_url}", sys.executable, "-m", "uvicorn",
                         "tokenwire.asgi:app", "--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop",
                         "--http", "httptools", "--log-level", "warning", "--no-access-log", "--backlog", "4096"]


SERVERS = {"tokenwire serve": _serve, "uvicorn tokenwire.asgi:app": _asgi}


@dataclass
class Measured:
    server: str
    log: str
    step: Step
    redis_cpu_s: float | None = None
    connections: int | None = None
    rounds: int | None = None
    idle_cpu_s: float | None = None     # what Redis's own upkeep took over the run (``idle_rate``), included above

    @property
    def tokens(self) -> int:
        return max(1, int(self.step.client["tokens_received"]))

    @property
    def cpu_us(self) -> float:
        return self.step.cpu_s / self.tokens * 1e6

    @property
    def per_round(self) -> float | None:
        """Tokens a script call, on average: a floor of the appends a round carried."""
        return None if not self.rounds else self.tokens / self.rounds

    @property
    def redis_us(self) -> float | None:
        return None if self.redis_cpu_s is None else self.redis_cpu_s / self.tokens * 1e6

    def line(self) -> str:
        c, n = self.step.client, self.step.n
        ratio, ttft = self.step.p95_ratio, self.step.ttft_p95_ms
        text = (f"{self.server} on {self.log}, N={n}: {c['complete']}/{n} complete, ITL p95 "
                f"{'-' if ratio is None else f'{ratio:.2f}x'}, TTFT p95 {'-' if ttft is None else f'{ttft:.0f} ms'}, "
                f"server CPU {self.cpu_us:.0f} us/token")
        if self.redis_us is not None:
            text += f", Redis CPU {self.redis_us:.1f} us/token"
            if self.idle_cpu_s is not None:
                text += f" (of it {self.idle_cpu_s / self.tokens * 1e6:.1f} its upkeep when idle)"
            text += f", Redis connections {self.connections}"
            if self.per_round is not None:
                text += f", {self.per_round:.0f} tokens a script call"
        if c["errors"] or c["timed_out"]:
            text += f"; errors {c['errors']}, timed out {c['timed_out']}"
        return text


def measure(server: str, log_name: str, n: int, tokens: int) -> Measured:
    """One server on one log with ``n`` streams (a fresh redis-server for the Redis log)."""
    if log_name == "memory":
        step = one_step(server, n, tokens, command=SERVERS[server]("memory", n))
        return Measured(server, log_name, step)
    redis = RedisServer()
    try:
        step = one_step(server, n, tokens, command=SERVERS[server](redis.url, n), beside=lambda port: redis.watch())
    finally:
        redis.stop()
    said = json.loads(step.client["beside"])
    return Measured(server, log_name, step, said["redis_cpu_s"], said["connections"], said["rounds"],
                    said.get("idle_cpu_s"))


def _rows(n: int, memory: Measured, shared: Measured) -> list[Row]:
    c, ratio = shared.step.client, shared.step.p95_ratio
    ttft = shared.step.ttft_p95_ms
    complete = c["complete"] == n
    cpu_ratio = shared.cpu_us / memory.cpu_us
    name = shared.server
    rows = [Row(17, f"{name} N={n} on Redis: complete | ITL p95 | TTFT p95",
                f"{c['complete']}/{n} | {_fmt(ratio)} | {ttft or 0:.0f} ms",
                f"memory {memory.step.client['complete']}/{n} | {_fmt(memory.step.p95_ratio)} | "
                f"{memory.step.ttft_p95_ms or 0:.0f} ms", None, f"all, <= {GOAL_P95}x, <= 1 s",
                complete and ratio is not None and ratio <= GOAL_P95 and ttft is not None
                and ttft <= MAX_TTFT_P95_MS, (shared.line(), memory.line()))]
    if n <= 300:
        rows += [
            Row(17, f"{name} N={n}: server CPU per token, us (Redis / memory)", f"{shared.cpu_us:.0f}",
                f"memory {memory.cpu_us:.0f}", cpu_ratio, f"<= {GOAL_CPU_RATIO}x", cpu_ratio <= GOAL_CPU_RATIO),
            Row(17, f"{name} N={n}: Redis CPU per token, us | connections", f"{shared.redis_us or 0:.1f} | "
                f"{shared.connections}", f"{shared.per_round or 0:.0f} tokens a script call", None,
                f"<= {GOAL_REDIS_US:g} | <= {GOAL_CONNECTIONS}",
                (shared.redis_us or 0) <= GOAL_REDIS_US and (shared.connections or 0) <= GOAL_CONNECTIONS),
        ]
    return rows


def run(quick: bool, steps: tuple[int, ...] | None = None) -> list[Row]:
    return paired(17, measure, ("memory", "redis"), _rows, steps or (QUICK_N if quick else FULL_N), quick)


Measure = Callable[[str, str, int, int], Measured]


def paired(issue: int, measured: Measure, logs: tuple[str, str], rows: Callable[[int, Measured, Measured], list[Row]],
           steps: tuple[int, ...], quick: bool) -> list[Row]:
    """Each server at each N on the first log, then on the second (one after the other, the same minutes): the
    rows ``rows`` makes of each pair.  ``bench.redis_cluster`` runs its single Redis against the cluster so."""
    tokens = QUICK_TOKENS if quick else TOKENS
    made: list[Row] = []
    for n in steps:
        for server in SERVERS:
            first = measured(server, logs[0], n, tokens)
            log(f"bench: issue {issue}: {first.line()}")
            second = measured(server, logs[1], n, tokens)
            log(f"bench: issue {issue}: {second.line()}")
            made += rows(n, first, second)
    return made


def _fmt(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def main(argv: list[str] | None = None) -> int:
    return command("bench.redis_scale", __doc__ or "", FULL_N, run, argv)


def command(module: str, doc: str, full: tuple[int, ...], ran: Callable[[bool, tuple[int, ...] | None], list[Row]],
            argv: list[str] | None) -> int:
    """``python -m <module> [--quick] [--n N,...]``: ``ran``'s rows as a table, with the machine and its load."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n", default="", help=f"comma-separated stream counts (default {','.join(map(str, full))})")
    args = parser.parse_args(argv)
    steps = tuple(int(x) for x in args.n.split(",") if x) or None
    started = time.perf_counter()
    load = os.getloadavg()[0]
    rows = ran(args.quick, steps)
    print(f"tokenwire bench (python -m {module} {' '.join(argv or sys.argv[1:])}) on {machine()}, "
          f"{PRODUCER_MS:g} ms a token")
    print(format_table(rows))
    print(f"\ntotal wall time {time.perf_counter() - started:.1f} s; 1-minute load average {load:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end (on {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
