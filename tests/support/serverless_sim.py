"""A serverless platform simulated with real parts; this module holds no tests.

How this works: ``ServerlessSim`` runs ``instances`` uvicorn processes serving
one ASGI app on one real ``redis-server`` (``TOKENWIRE_LOG_URL``-style log in
the app's environment), behind a real ``haproxy`` (round robin, no
stickiness, a connection that cannot reach an instance redispatched to
another).  A supervisor thread SIGKILLs each instance when its fixed life
is up (its "maxDuration"; the first lives are staggered so that deaths are
spread out) and starts a fresh process on the same port at once, as a
platform starts a new instance: whatever the killed process held in memory
is gone, only Redis remains.  ``kills`` records every death (monotonic
time, slot, pid) so that a test can count the deaths a stream lived
through.  Every wait is bounded; ``close`` stops everything it started.

``require_haproxy`` finds the binary (often in ``/usr/sbin``, off a normal
user's PATH); without it the test skips, and fails under
``TOKENWIRE_REQUIRE_ALL=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from httpx_sse import connect_sse

from support.asgi import ROOT
from support.requirements import free_port, skip_or_fail

__all__ = ["Followed", "Kill", "ServerlessSim", "follow", "require_haproxy"]

# How long haproxy and the first instances may take to listen.
START_TIMEOUT_S = 20.0
# haproxy's health check: every 100 ms, one failure marks an instance down, one success up again.  (Its
# config also says `option http-no-delay`: without it haproxy holds small writes back, and an event stream
# arrives in bursts up to ~300 ms apart.)
CHECK = "check inter 100 fall 1 rise 1"


def require_haproxy() -> str:
    """The path of ``haproxy``; skips the test without it (fails under ``TOKENWIRE_REQUIRE_ALL=1``)."""
    path = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin:/sbin")
    if path is not None:
        return path
    skip_or_fail("'haproxy' is not installed (apt-get install haproxy); install it to run the serverless "
                 "simulator", "a missing program")


@dataclass(frozen=True)
class Kill:
    """One instance death: when (``time.monotonic()``, and ``time.time()`` for other processes' clocks), which
    slot, which process."""

    at: float
    slot: int
    pid: int
    wall: float


def _haproxy_config(port: int, backends: list[int]) -> str:
    servers = "\n".join(f"  server i{n} 127.0.0.1:{p} {CHECK}" for n, p in enumerate(backends))
    return f"""global
  maxconn 2000
defaults
  mode http
  timeout connect 500ms
  timeout client 60s
  timeout server 60s
  retries 3
  option redispatch 1
  option http-no-delay
frontend front
  bind 127.0.0.1:{port}
  default_backend instances
backend instances
  balance roundrobin
{servers}
"""


class ServerlessSim:
    """``instances`` uvicorn processes of ``target`` behind haproxy on ``url``, each killed after ``life_s``."""

    def __init__(self, target: str, env: dict[str, str], *, instances: int = 3, life_s: float = 6.0,
                 app_dir: Path = ROOT / "tests") -> None:
        self.target, self.app_dir, self.life_s = target, app_dir, life_s
        self.env = {**os.environ, **env}
        self.ports = [free_port() for _ in range(instances)]
        self.port = free_port()
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * instances
        self.kills: list[Kill] = []
        self.started = 0                          # instance processes started, the first ones included
        self.haproxy: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._dir = tempfile.TemporaryDirectory()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- starting and stopping ------------------------------------------------------------
    def start(self) -> None:
        """Start the instances and haproxy, wait until all listen, then start killing; raises ``RuntimeError``."""
        binary = require_haproxy()
        for slot in range(len(self.ports)):
            self._spawn(slot)
        config = Path(self._dir.name) / "haproxy.cfg"
        config.write_text(_haproxy_config(self.port, self.ports))
        self.haproxy = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self._wait_listening([*self.ports, self.port])
        self._supervisor = threading.Thread(target=self._supervise, name="serverless-sim", daemon=True)
        self._supervisor.start()

    def close(self) -> None:
        """Stop killing, then stop every process this started (instances with SIGKILL, haproxy with SIGTERM)."""
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(START_TIMEOUT_S)
        with self._lock:
            for slot, proc in enumerate(self.procs):
                if proc is not None:
                    _kill(proc)
                    self.procs[slot] = None
        if self.haproxy is not None:
            self.haproxy.terminate()
            try:
                self.haproxy.wait(START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _kill(self.haproxy)
            self.haproxy = None
        self._dir.cleanup()

    def __enter__(self) -> ServerlessSim:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def kills_between(self, start: float, end: float) -> int:
        """How many instances died between ``start`` and ``end`` (``time.monotonic()``)."""
        with self._lock:
            return sum(1 for kill in self.kills if start <= kill.at <= end)

    # -- the platform ------------------------------------------------------------------------
    def _spawn(self, slot: int) -> None:
        self.procs[slot] = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", self.target, "--app-dir", str(self.app_dir), "--host", "127.0.0.1",
             "--port", str(self.ports[slot]), "--loop", "uvloop", "--http", "httptools", "--log-level", "warning",
             "--no-access-log"],
            cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.started += 1

    def _supervise(self) -> None:
        """Kill each instance when its life is up and start a fresh one on its port; the first lives staggered."""
        now = time.monotonic()
        count = len(self.ports)
        deadlines = [now + self.life_s * (slot + 1) / count for slot in range(count)]
        while not self._stop.is_set():
            slot = min(range(count), key=deadlines.__getitem__)
            if self._stop.wait(max(0.0, deadlines[slot] - time.monotonic())):
                return
            with self._lock:
                proc = self.procs[slot]
                if proc is not None:
                    _kill(proc)
                    self.kills.append(Kill(time.monotonic(), slot, proc.pid, time.time()))
                self._spawn(slot)
            deadlines[slot] = time.monotonic() + self.life_s

    def _wait_listening(self, ports: list[int]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        waiting = list(ports)
        while waiting and time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", waiting[0]), timeout=0.2):
                    waiting.pop(0)
            except OSError:
                time.sleep(0.05)
        if waiting:
            raise RuntimeError(f"nothing listened on ports {waiting} within {START_TIMEOUT_S} s")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``proc`` and reap it (bounded)."""
    try:
        proc.send_signal(signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass


# -- a reader that reconnects as an EventSource does -------------------------------------------------
@dataclass
class Followed:
    """What ``follow`` read: tokens (id, text, arrival), the ``open`` frames, the last event, every status."""

    tokens: list[tuple[int, str, float]]
    opens: list[dict[str, object]]
    end: tuple[str, dict[str, object]] | None
    statuses: list[int]
    started: float
    ended: float

    @property
    def ids(self) -> list[int]:
        return [index for index, _, _ in self.tokens]

    @property
    def text(self) -> str:
        return "".join(text for _, text, _ in self.tokens)


def follow(url: str, *, timeout_s: float = 90.0) -> Followed:
    """Read the event stream at ``url`` with httpx-sse to its ``done`` or ``error``, reconnecting as an EventSource.

    A connection that ends without them (its instance died), or any answer
    but 200, is followed by a reconnect after the stream's ``retry`` with
    ``Last-Event-ID``; a 204 ends it.  Gives up after ``timeout_s``.
    """
    got = Followed([], [], None, [], time.monotonic(), 0.0)
    deadline, retry_s, last = got.started + timeout_s, 0.75, None
    while got.end is None and time.monotonic() < deadline:
        headers = {} if last is None else {"Last-Event-ID": last}
        try:
            with (httpx.Client(timeout=httpx.Timeout(5.0, read=20.0)) as client,
                  connect_sse(client, "GET", url, headers=headers) as source):
                got.statuses.append(source.response.status_code)
                if source.response.status_code == 204:
                    got.end = ("204", {})
                    break
                if source.response.status_code == 200:
                    for event in source.iter_sse():
                        if event.retry is not None:
                            retry_s = event.retry / 1000
                        if event.event == "open":
                            got.opens.append(json.loads(event.data))
                        elif event.event == "token":
                            got.tokens.append((int(event.id), event.data, time.monotonic()))
                            last = event.id
                        elif event.event in ("done", "failed"):
                            got.end = (event.event, json.loads(event.data))
                            break
        except httpx.HTTPError:
            pass                                 # the instance died under the connection: reconnect
        if got.end is None:
            time.sleep(retry_s)
    got.ended = time.monotonic()
    return got


def main() -> None:
    """``PYTHONPATH=tests python -m support.serverless_sim``: one continued model and the canned answer, read
    through the simulator."""
    import statistics

    from support.redis import running_redis

    calls = Path(tempfile.mkdtemp()) / "calls.jsonl"
    with running_redis() as redis_server:
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?lease_ms=600&block_ms=100",
               "TOKENWIRE_TEST_CALLS": str(calls)}
        with ServerlessSim("support.apps.serverless:app", env) as sim:
            made = {"continued": httpx.post(f"{sim.url}/continued/streams?n=300&delay_ms=100").json(),
                    "canned": httpx.post(f"{sim.url}/canned/streams?tokens=277&producer_ms=100").json()}
            got: dict[str, Followed] = {}
            readers = [threading.Thread(target=lambda k=k: got.__setitem__(k, follow(sim.url + made[k]["events_url"])))
                       for k in made]
            for reader in readers:
                reader.start()
            for reader in readers:
                reader.join(120)
            for name, read in got.items():
                gaps = sorted(b[2] - a[2] for a, b in zip(read.tokens, read.tokens[1:], strict=False))
                deaths, took = sim.kills_between(read.started, read.ended), read.ended - read.started
                largest = [round(g * 1e3) for g in gaps[-5:]]
                print(f"{name}: {len(read.ids)} tokens, each once in order: {read.ids == list(range(len(read.ids)))}, "
                      f"ends {read.end[0] if read.end else None}, {len(read.opens)} connections, "
                      f"{deaths} instance deaths in {took:.1f} s; gaps p50 {statistics.median(gaps) * 1e3:.0f} ms, "
                      f"the largest {largest} ms")
            starts = [json.loads(line)["start"] for line in calls.read_text().splitlines()
                      if json.loads(line)["stream_id"] == made["continued"]["stream_id"]]
            print(f"the model's factory was called at indexes {starts}; {sim.started} instances started in all")


if __name__ == "__main__":
    main()
