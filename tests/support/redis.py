"""A private redis-server for the tests: a free loopback port, no persistence, stoppable mid-test.

How this works: ``RedisServer`` starts ``redis-server`` on 127.0.0.1 with
``--save '' --appendonly no`` (nothing touches the disk) on a port the kernel
said was free, waits until it answers ``PING``, and stops it with SIGTERM.
``stop()`` then ``start()`` brings it back on the same port, empty, which is
what a crashed and restarted Redis without persistence looks like.  Every
wait is bounded.  ``RedisClusterNodes`` is a Redis Cluster of three such
servers (``--cluster-enabled yes``, each on a port whose bus port, +10,000, is
free too) made one with ``redis-cli --cluster create``, waited until every
node says ``cluster_state:ok``; ``redis_cluster`` is the module's, emptied
for each test, and ``begin_migration``/``end_migration`` move one slot as
``redis-cli --cluster reshard`` does.  Without ``redis-server`` (or the ``redis`` package) the
tests skip with a reason, and fail instead when ``TOKENWIRE_REQUIRE_ALL=1``.

Every server's ``default`` user (the one ``url`` logs in as) holds exactly the ACL rule docs/redis.md
gives (``LEAST_PRIVILEGE``): what the tests do as an operator goes through ``redis_command``, ``admin(url)`` or
``operator()``, which log in as a user who may do anything; ``allow`` lets one test's default user run one more
command.

What a test waits for in Redis is a condition asked of Redis, never a sleep
past it: ``lease_expired`` (a lease nothing renews is gone), ``until_logged``
(an owner has logged so many tokens), ``client_ids``
and ``until_a_new_read_blocks`` (a follower's ``XREAD`` is blocked in Redis now).  A stream's keys are
``stream_keys``, what a log names them (``RedisTokenLog.keys``), never written out here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import socket
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from support.docs import marked_block
from support.live import await_until, wait_until
from support.processes import stop, wait_ready
from support.requirements import free_port, require_binary, skip_or_fail
from tokenwire.realtime import new_loop

# How long redis-server may take to answer its first PING (it starts in ~10 ms).
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
# How long a scene of several log calls (``run_scene``) may take on a loaded machine.
SCENE_TIMEOUT_S = 30.0
# How long a test waits for a condition in Redis (a lease to expire, a read to block) before it fails.
CONDITION_TIMEOUT_S = 10.0


# Every ``RedisServer`` gives its ``default`` user (the one its ``url`` logs in as) exactly the ACL rule
# docs/redis.md gives, and the tests' own calls as an operator (``admin``, ``operator``) log in as ``ADMIN``:
# every Redis test so proves that rule is all tokenwire needs.  ``TOKENWIRE_TEST_REDIS_ACL=0`` turns it off.
LEAST_PRIVILEGE = os.environ.get("TOKENWIRE_TEST_REDIS_ACL", "1") != "0"
ADMIN, ADMIN_PASSWORD = "tokenwire-tests-admin", "admin-pw"


def admin(url: str) -> str:
    """``url`` logging in as the tests' operator (``ADMIN``) where the servers hold the docs' rule, else ``url``."""
    if not LEAST_PRIVILEGE or "@" in url.partition("://")[2].partition("/")[0]:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{ADMIN}:{ADMIN_PASSWORD}@{rest}"


def operator() -> dict[str, str]:
    """redis-py's keywords that log in as the tests' operator (none where the servers are not restricted)."""
    return {"username": ADMIN, "password": ADMIN_PASSWORD} if LEAST_PRIVILEGE else {}


def allow(url: str, *commands: str) -> None:
    """Let the ``default`` user of the Redis at ``url`` run ``commands`` (``+config|get``) too, where it holds
    the docs' rule: for a test of what tokenwire does with a command the rule leaves out."""
    if LEAST_PRIVILEGE:
        redis_command(url, "ACL", "SETUSER", "default", *commands)


@functools.cache
def _rule_words() -> tuple[str, ...]:
    """The docs' rule after ``ACL SETUSER tw``, its password ``nopass``: what the default user is given."""
    return tuple("nopass" if word == ">pw" else word for word in marked_block("acl-rule", "text").split()[3:])


def _restrict(port: int, replicates_as_given: bool) -> None:
    """The docs' rule on ``port``'s ``default`` user (no password), and ``ADMIN`` who may do anything, as whom
    the server replicates from another (``REPLICAOF``) unless its options name a user for it."""
    import redis
    with redis.Redis(port=port) as plain:
        plain.execute_command("ACL", "SETUSER", ADMIN, "on", f">{ADMIN_PASSWORD}", "~*", "&*", "+@all")
        if not replicates_as_given:
            with contextlib.suppress(redis.ResponseError):      # a server whose CONFIG is renamed away
                plain.execute_command("CONFIG", "SET", "masteruser", ADMIN, "masterauth", ADMIN_PASSWORD)
        plain.execute_command("ACL", "SETUSER", "default", "reset", *_rule_words())


def require_redis() -> str:
    """Return the path of ``redis-server`` once it and the ``redis`` package are known to be there.

    Missing either skips the test, or fails it under ``TOKENWIRE_REQUIRE_ALL=1`` (``support.requirements``' rule).
    """
    binary = require_binary("redis-server")
    try:
        import redis  # noqa: F401
    except ImportError:
        skip_or_fail("the redis Python package is not installed: pip install 'tokenwire[redis]'")
    return binary


class RedisServer:
    """One ``redis-server`` process on ``127.0.0.1:port``; ``url`` is its ``redis://`` URL; ``args`` are more
    of its options (``("--maxmemory", "4mb")``)."""

    def __init__(self, binary: str, port: int | None = None, args: tuple[str, ...] = ()) -> None:
        self.binary, self.port, self.args = binary, port or free_port(), args
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it answers; raises ``RuntimeError`` if it does not."""
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no", "--loglevel", "warning", "--logfile", "", *self.args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_ready(self.proc, self.ping, f"redis-server on port {self.port}", START_TIMEOUT_S, self._stderr)
        if LEAST_PRIVILEGE:
            _restrict(self.port, replicates_as_given="--masteruser" in self.args)

    def _stderr(self) -> str:
        """What the process wrote on stderr (read once it has exited)."""
        proc = self.proc
        return proc.stderr.read().decode(errors="replace") if proc is not None and proc.stderr else ""

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and wait for it to exit."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        stop(proc, signal.SIGTERM, STOP_TIMEOUT_S)
        if proc.stderr:
            proc.stderr.close()

    def flush(self) -> None:
        redis_command(self.url, "FLUSHALL")


@contextlib.contextmanager
def running_redis(*args: str) -> Iterator[RedisServer]:
    """A ``redis-server`` of its own on a free port (``args``: more of its options), stopped on exit."""
    server = RedisServer(require_redis(), args=args)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_session() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture
def redis_server(redis_session: RedisServer) -> Iterator[RedisServer]:
    """The session's Redis, emptied for this test."""
    if redis_session.proc is None:
        redis_session.start()
    redis_session.flush()
    yield redis_session


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis of this test's own, which the test may stop and start again on the same port."""
    with running_redis() as server:
        yield server


def stream_keys(url: str, stream_id: str) -> tuple[str, str, str]:
    """The meta, tokens and lease keys of ``stream_id`` in the Redis at ``url``: what a log there names them
    (``RedisTokenLog.keys``; a log connects only when used, so making one here costs nothing)."""
    from tokenwire.redislog.blocking import RedisTokenLog
    return RedisTokenLog(url).keys(stream_id)


def lease_expired(url: str, *stream_ids: str) -> None:
    """Return once Redis at ``url`` has let the lease of each of ``stream_ids`` expire (an async test awaits it
    with ``asyncio.to_thread``).

    What a takeover waits for: an owner that renews nothing loses its lease when Redis's clock says so,
    however long the test's own steps take; raises ``AssertionError`` after ``CONDITION_TIMEOUT_S``.
    """
    import redis
    with redis.Redis.from_url(admin(url)) as raw:
        wait_until(lambda: not raw.exists(*(stream_keys(url, stream_id)[2] for stream_id in stream_ids)),
                   f"the leases of {stream_ids!r} to expire", CONDITION_TIMEOUT_S)


def client_list(port: int) -> list[dict[str, str]]:
    """``CLIENT LIST`` of the Redis on ``port``, one dict a connection (the one asking included)."""
    listed = str(redis_command(f"redis://127.0.0.1:{port}/0", "CLIENT", "LIST"))
    return [dict(field.partition("=")[::2] for field in line.split(" ")) for line in listed.splitlines() if line]


def redis_command(url: str, *args: object) -> object:
    """One command sent to the Redis at ``url`` from outside any log (as an operator, or eviction, acts);
    replies decoded."""
    import redis
    with redis.Redis.from_url(admin(url), decode_responses=True) as plain:
        return plain.execute_command(*args)


def client_ids(port: int) -> set[str]:
    """The ids of the connections the Redis on ``port`` holds now."""
    return {client["id"] for client in client_list(port)}


async def until_a_new_read_blocks(port: int, known: set[str]) -> None:
    """Return once a connection not in ``known`` (``client_ids`` taken before) is blocked in an ``XREAD``.

    A follower waiting on Redis itself, not on its way there; a connection known before (another log's
    read lingering) does not count.  Raises ``AssertionError`` after ``CONDITION_TIMEOUT_S``.
    """
    def blocked() -> bool:
        return any(client["cmd"] == "xread" and "b" in client["flags"] and client["id"] not in known
                   for client in client_list(port))
    await await_until(lambda: asyncio.to_thread(blocked), "a new connection blocked in XREAD", CONDITION_TIMEOUT_S)


def until_logged(url: str, stream_id: str, count: int) -> None:
    """Return once the log at ``url`` holds at least ``count`` tokens of ``stream_id`` (its owner logs on).

    Raises ``AssertionError`` after ``CONDITION_TIMEOUT_S``.
    """
    import redis
    key = stream_keys(url, stream_id)[1]
    with redis.Redis.from_url(admin(url)) as raw:
        wait_until(lambda: raw.xlen(key) >= count, lambda: f"{count} tokens of {stream_id!r} logged, not "
                   f"{raw.xlen(key)}", CONDITION_TIMEOUT_S)


def run_scene(scene: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``scene()`` (log calls against Redis) to its end on a fresh event loop, bounded."""
    loop = new_loop()
    try:
        return loop.run_until_complete(asyncio.wait_for(scene(), SCENE_TIMEOUT_S))
    finally:
        loop.close()


# How long a new cluster may take to say cluster_state:ok on every node (gossip settles in about a second).
CLUSTER_TIMEOUT_S = 20.0
# A cluster node also listens on its port + 10,000 (the cluster bus), so its port is at most 65,535 - 10,000.
_BUS_OFFSET = 10_000
_MAX_NODE_PORT = 65_535 - _BUS_OFFSET


def _node_port() -> int:
    """A free loopback port whose cluster bus port is free too (both bound once to be sure)."""
    for _ in range(1000):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port > _MAX_NODE_PORT:
            continue
        try:
            with socket.socket() as bus:
                bus.bind(("127.0.0.1", port + _BUS_OFFSET))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a cluster node (port and port + 10000)")


class RedisClusterNodes:
    """``size`` cluster-enabled ``redis-server``s (their node files in ``folder``) made one cluster with
    ``redis-cli --cluster create``, no replicas; ``url`` names the first node, ``nodes`` are the servers."""

    def __init__(self, folder: str, size: int = 3) -> None:
        binary = require_redis()
        self.cli = require_binary("redis-cli")
        ports = [_node_port() for _ in range(size)]
        self.nodes = [RedisServer(binary, port, ("--cluster-enabled", "yes", "--cluster-config-file",
                                                 f"{folder}/nodes-{port}.conf", "--dir", folder))
                      for port in ports]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self) -> None:
        """Start every node, make them one cluster, and wait until each says ``cluster_state:ok``."""
        for node in self.nodes:
            node.start()
        made = subprocess.run([self.cli, "--cluster", "create", *(f"127.0.0.1:{node.port}" for node in self.nodes),
                               "--cluster-replicas", "0", "--cluster-yes",
                               *(("--user", ADMIN, "--pass", ADMIN_PASSWORD) if LEAST_PRIVILEGE else ())],
                              capture_output=True, text=True, timeout=CLUSTER_TIMEOUT_S, check=False)
        if made.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {made.stdout}{made.stderr}")
        wait_until(lambda: all("cluster_state:ok" in str(self.ask(node.port, "CLUSTER", "INFO"))
                               for node in self.nodes), "cluster_state:ok on every node", CLUSTER_TIMEOUT_S)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def flush(self) -> None:
        for node in self.nodes:
            node.flush()

    @staticmethod
    def ask(port: int, *args: object) -> Any:
        """One command to the node on ``port`` alone (no redirection followed); replies decoded."""
        import redis
        with redis.Redis(port=port, decode_responses=True, **operator()) as plain:
            return plain.execute_command(*args)

    @staticmethod
    def ask_importing(port: int, *args: object) -> Any:
        """One command to the node on ``port`` after ``ASKING`` (a slot it imports), on one connection."""
        import redis
        with redis.Redis(port=port, decode_responses=True, **operator()) as plain:
            pipe = plain.pipeline(transaction=False)
            pipe.execute_command("ASKING")
            pipe.execute_command(*args)
            return pipe.execute()[1]

    def node_of(self, key: str) -> RedisServer:
        """The node serving ``key``'s slot now."""
        from redis.crc import key_slot
        slot = key_slot(key.encode())
        for first, last, primary, *_ in self.ask(self.nodes[0].port, "CLUSTER", "SLOTS"):
            if first <= slot <= last:
                return next(node for node in self.nodes if node.port == int(primary[1]))
        raise AssertionError(f"slot {slot} of {key!r} is served by no node")

    def node_id(self, node: RedisServer) -> str:
        return str(self.ask(node.port, "CLUSTER", "MYID"))

    def begin_migration(self, slot: int, source: RedisServer, target: RedisServer) -> list[str]:
        """Start moving ``slot`` from ``source`` to ``target`` as ``redis-cli --cluster reshard`` does: the slot
        ``IMPORTING`` on the target and ``MIGRATING`` on the source, then its keys ``MIGRATE``d in one call (so
        the source answers ``ASK`` for them from now on); returns the keys moved."""
        self.ask(target.port, "CLUSTER", "SETSLOT", slot, "IMPORTING", self.node_id(source))
        self.ask(source.port, "CLUSTER", "SETSLOT", slot, "MIGRATING", self.node_id(target))
        keys = list(self.ask(source.port, "CLUSTER", "GETKEYSINSLOT", slot, 1000))
        if keys:
            login = operator()
            auth = ("AUTH2", login["username"], login["password"]) if login else ()
            self.ask(source.port, "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, *auth, "KEYS", *keys)
        return keys

    def end_migration(self, slot: int, target: RedisServer) -> None:
        """Give ``slot`` to ``target`` on every node (the target first): every other node says ``MOVED``."""
        target_id = self.node_id(target)
        for node in sorted(self.nodes, key=lambda node: node is not target):
            self.ask(node.port, "CLUSTER", "SETSLOT", slot, "NODE", target_id)

    def client(self) -> Any:
        """redis-py's cluster client on this cluster (every redirection followed), replies decoded."""
        import redis.cluster
        return redis.cluster.RedisCluster(host="127.0.0.1", port=self.nodes[0].port, decode_responses=True)


@pytest.fixture(scope="module")
def redis_cluster_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterNodes]:
    cluster = RedisClusterNodes(str(tmp_path_factory.mktemp("cluster")))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster(redis_cluster_module: RedisClusterNodes) -> Iterator[RedisClusterNodes]:
    """The module's 3-node Redis Cluster, emptied for this test."""
    redis_cluster_module.flush()
    yield redis_cluster_module
