"""Issue 33: the Redis scale bench (``bench.redis_scale``) on a 3-node Redis Cluster, against one redis-server.

How this works: for each N (300 by default) and each server (``tokenwire
serve``, then ``uvicorn tokenwire.asgi:app``), the same server runs twice in
a row, once on a fresh ``redis-server`` of its own (as ``bench.redis_scale``)
and once on a fresh cluster of three (cluster-enabled ``redis-server``s made
one with ``redis-cli --cluster create``, no replicas; the log URL names the
first node), and item 5's client reads N streams of the 277-token answer at
20 ms a token.  The server's CPU comes from ``/proc/<pid>/stat`` over the
client's run; Redis's is every node's summed (the notes say how much of it
the nodes spend idle, measured for 2 s before the run: a cluster's bus and
cron cost about 0.3% of a core a node, whatever the tokens), and its connections are the
most any one node held (``CLIENT LIST`` every 0.2 s, less the sampler's
own).  The goals are issue 33's: every stream complete, the server's CPU
per token on the cluster at most 1.3x its CPU on one Redis, Redis's CPU per
token at most 4 us summed over the nodes, and at most two connections per
node from the one server process.

``python -m bench.redis_cluster [--quick] [--n 300]``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from .common import Row
from .redis_scale import GOAL_REDIS_US, SAMPLE_S, SERVERS, Measured, RedisServer, command, idle_rate, paired
from .scale import _free_port, one_step

__all__ = ["ClusterServers", "run"]

FULL_N, QUICK_N = (300,), (40,)
GOAL_CPU_RATIO = 1.3
GOAL_CONNECTIONS_PER_NODE = 2
NODES = 3
# A cluster node also listens on its port + 10,000 (the cluster bus).
_BUS_OFFSET = 10_000
START_TIMEOUT_S = 20.0


def _node_port() -> int:
    """A free port whose cluster bus port (+10,000) is free and valid too."""
    while True:
        port = _free_port()
        if port + _BUS_OFFSET > 65_535:
            continue
        try:
            with socket.socket() as bus:
                bus.bind(("127.0.0.1", port + _BUS_OFFSET))
        except OSError:
            continue
        return port


class ClusterServers:
    """``NODES`` cluster-enabled ``redis-server``s of the bench's own made one cluster, nothing kept on disk."""

    def __init__(self) -> None:
        self.folder = tempfile.TemporaryDirectory()
        self.nodes: list[RedisServer] = []
        for _ in range(NODES):
            port = _node_port()
            self.nodes.append(_ClusterNode(port, self.folder.name))
        made = subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
                               "--cluster-replicas", "0", "--cluster-yes"], capture_output=True, text=True,
                              timeout=START_TIMEOUT_S, check=False)
        if made.returncode != 0:
            self.stop()
            raise RuntimeError(f"redis-cli --cluster create failed: {made.stdout}{made.stderr}")
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(b"cluster_state:ok" in node.ask(b"CLUSTER INFO") for node in self.nodes):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the cluster did not say cluster_state:ok")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def watch(self) -> Callable[[], str]:
        """Start sampling every node's connections; returns what stops it and gives the figures as JSON
        (CPU and script calls summed over the nodes, the most connections any one node held)."""
        def cpu_s() -> float:
            return sum(n.cpu_s() for n in self.nodes)
        idle = idle_rate(lambda: sum(n.run_s() for n in self.nodes))
        for node in self.nodes:
            node.ask(b"CONFIG RESETSTAT")
        cpu0, most, stop, began = cpu_s(), [0], threading.Event(), time.monotonic()

        def sample() -> None:
            while not stop.wait(SAMPLE_S):
                most[0] = max(most[0], *(node.clients() for node in self.nodes))
        thread = threading.Thread(target=sample, daemon=True)
        thread.start()

        def done() -> str:
            stop.set()
            thread.join(5)
            return json.dumps({"redis_cpu_s": cpu_s() - cpu0, "connections": most[0],
                               "rounds": sum(n.rounds() for n in self.nodes),
                               "idle_cpu_s": idle * (time.monotonic() - began)})
        return done

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.folder.cleanup()


class _ClusterNode(RedisServer):
    """A ``redis-server`` of the bench's own, cluster-enabled, on ``port``."""

    def __init__(self, port: int, folder: str) -> None:
        self.port = port
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--maxclients", "10000", "--loglevel", "warning", "--logfile", "", "--cluster-enabled", "yes",
             "--cluster-config-file", f"{folder}/nodes-{port}.conf", "--dir", folder],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if self.ask(b"PING").startswith(b"+PONG"):
                    return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"cluster redis-server did not answer on port {port}")


def measure(server: str, log_name: str, n: int, tokens: int) -> Measured:
    """One server on one Redis (``redis``) or on a fresh cluster (``cluster``) with ``n`` streams."""
    redis = RedisServer() if log_name == "redis" else ClusterServers()
    try:
        step = one_step(server, n, tokens, command=SERVERS[server](redis.url, n), beside=lambda port: redis.watch())
    finally:
        redis.stop()
    said = json.loads(step.client["beside"])
    return Measured(server, log_name, step, said["redis_cpu_s"], said["connections"], said["rounds"],
                    said.get("idle_cpu_s"))


def _rows(n: int, one: Measured, cluster: Measured) -> list[Row]:
    c = cluster.step.client
    ratio = cluster.cpu_us / one.cpu_us
    name = cluster.server
    return [
        Row(33, f"{name} N={n} on a 3-node cluster: complete", f"{c['complete']}/{n}",
            f"one Redis {one.step.client['complete']}/{n}", None, "all", c["complete"] == n,
            (cluster.line(), one.line())),
        Row(33, f"{name} N={n}: server CPU per token, us (cluster / one Redis)", f"{cluster.cpu_us:.0f}",
            f"one Redis {one.cpu_us:.0f}", ratio, f"<= {GOAL_CPU_RATIO}x", ratio <= GOAL_CPU_RATIO),
        Row(33, f"{name} N={n}: Redis CPU per token over the nodes, us | most connections to a node",
            f"{cluster.redis_us or 0:.1f} | {cluster.connections}",
            f"one Redis {one.redis_us or 0:.1f} | {one.connections}", None,
            f"<= {GOAL_REDIS_US:g} | <= {GOAL_CONNECTIONS_PER_NODE}",
            (cluster.redis_us or 0) <= GOAL_REDIS_US and (cluster.connections or 0) <= GOAL_CONNECTIONS_PER_NODE),
    ]


def run(quick: bool, steps: tuple[int, ...] | None = None) -> list[Row]:
    return paired(33, measure, ("redis", "cluster"), _rows, steps or (QUICK_N if quick else FULL_N), quick)


def main(argv: list[str] | None = None) -> int:
    return command("bench.redis_cluster", __doc__ or "", FULL_N, run, argv)


if __name__ == "__main__":
    sys.exit(main())
