"""A Redis primary with two replicas and three ``redis-sentinel``s watching it, for failover tests.

How this works: ``SentinelSet`` starts a primary (``support.redis.RedisServer``), two replicas of it
(``--replicaof``) and three sentinels, each from a config file of its own in the test's folder (a
sentinel rewrites its file), with ``sentinel monitor mymaster 127.0.0.1 <port> 2``, ``down-after-
milliseconds 1000`` and ``failover-timeout 3000``: a primary killed is replaced within a few seconds.
``start`` returns once every replica is in sync and every sentinel knows both replicas and the two other
sentinels (they learn that from each other's hello messages, within a few seconds), so a failover can
happen at once.  ``url`` is the ``redis+sentinel://`` URL naming the three sentinels.  ``kill`` is SIGKILL
(a crash: nothing is handed over); ``primary`` asks the sentinels who the primary is now, and
``until_switched`` waits until every sentinel names another one, ``until_followed`` until a replica
follows it; ``cut_replication`` makes the replicas
lag for real (the primary refuses their links).  Every wait is bounded, a condition
asked of the servers, never a sleep.

With ``tls`` (``support.redis_tls``'s certificates) every server and sentinel has a TLS port beside its
plain one that wants a client certificate, the servers replicate and the sentinels watch them over TLS
(``tls-replication yes``: the sentinels then name the TLS ports), and ``url`` is the
``rediss+sentinel://`` URL of the sentinels' TLS ports with every certificate setting.  Ports a test is
given (``primary.port``, what ``until_switched`` returns) are the plain ones, which the helpers ask.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from support.live import wait_until
from support.processes import stop, wait_ready
from support.redis import (
    ADMIN,
    ADMIN_PASSWORD,
    LEAST_PRIVILEGE,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    RedisServer,
    operator,
    require_redis,
)
from support.redis_tls import KEY_PASSPHRASE, Certificates
from support.requirements import free_port, require_binary

SERVICE = "mymaster"
# How long sentinels and replicas may take to find each other (hello messages every 2 s) and sync.
SETTLE_TIMEOUT_S = 20.0
# How long a failover may take: down-after (1 s) + an election + the promotion, a few seconds; failover-timeout
# (3 s) again if the first try fails.
FAILOVER_TIMEOUT_S = 20.0
# What the sentinels are told (the numbers): a primary is down after 1 s without an answer, and a
# failover that has not finished in 3 s is tried again.
_SENTINEL_CONF = """port {port}
bind 127.0.0.1
daemonize no
dir {folder}
logfile ""
sentinel monitor {service} 127.0.0.1 {primary} 2
sentinel down-after-milliseconds {service} 1000
sentinel failover-timeout {service} 3000
sentinel parallel-syncs {service} 2
"""
# Where the servers' default user holds only the docs' rule (``support.redis.LEAST_PRIVILEGE``), the sentinels
# watch them as the tests' operator, who is a user of each sentinel's own too.
_OPERATOR_CONF = f"""sentinel auth-user {{service}} {ADMIN}
sentinel auth-pass {{service}} {ADMIN_PASSWORD}
user {ADMIN} on >{ADMIN_PASSWORD} ~* &* +@all
user default on nopass ~* &* +@all
""" if LEAST_PRIVILEGE else ""


_TLS_CONF = """tls-port {tls_port}
tls-cert-file {certificates.server_cert}
tls-key-file {certificates.server_key}
tls-ca-cert-file {certificates.ca}
tls-auth-clients yes
tls-replication yes
"""


def _tls_args(certificates: Certificates, tls_port: int) -> tuple[str, ...]:
    """A server's TLS port and certificates, as options (``_TLS_CONF`` as a sentinel's file has them)."""
    lines = _TLS_CONF.format(tls_port=tls_port, certificates=certificates).splitlines()
    return tuple(part for line in lines for part in (f"--{line.split(' ', 1)[0]}", line.split(" ", 1)[1]))


def ask(port: int, *args: object) -> Any:
    """One command to the server (or sentinel) on ``port``; replies decoded."""
    import redis
    with redis.Redis(port=port, decode_responses=True, socket_timeout=2, **operator()) as plain:
        return plain.execute_command(*args)


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class Sentinel:
    """One ``redis-sentinel`` on ``127.0.0.1:port``, its config in ``folder``."""

    def __init__(self, binary: str, folder: Path, primary: int, port: int, tls: str = "") -> None:
        self.binary, self.port = binary, port
        self.conf = folder / f"sentinel-{self.port}.conf"
        self.conf.write_text((_SENTINEL_CONF + _OPERATOR_CONF).format(port=self.port, folder=folder, service=SERVICE,
                                                                      primary=primary) + tls)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([self.binary, str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_ready(self.proc, lambda: answers(self.port), f"redis-sentinel on port {self.port}", START_TIMEOUT_S,
                   lambda: "")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop(proc, signal.SIGTERM, STOP_TIMEOUT_S)

    def named(self) -> int:
        """The port of the primary this sentinel names."""
        return int(ask(self.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)[1])

    def master(self) -> dict[str, str]:
        """What this sentinel says of the primary (``SENTINEL MASTER``), as a dict."""
        reply = ask(self.port, "SENTINEL", "MASTER", SERVICE)
        return dict(reply) if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))


# Every server replicates as a user of its own, so a test can cut replication off at the primary (the
# replicas then cannot sync: they lag for real, where a stopped replica would find the bytes in its socket).
_REPLICATOR, _REPLICATOR_PASSWORD = "replicator", "replicator-pw"
_REPLICATION = ("--user", _REPLICATOR, "on", f">{_REPLICATOR_PASSWORD}", "~*", "&*", "+@all",
                "--masteruser", _REPLICATOR, "--masterauth", _REPLICATOR_PASSWORD)


def _distinct_ports(count: int) -> list[int]:
    """``count`` free loopback ports, no two the same (the kernel may hand out a port it just gave)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _own_dir(folder: Path, port: int) -> tuple[str, ...]:
    """A server's ``--dir`` of its own: a replica's full sync writes dump.rdb there, which a server started in
    the same folder would load (a killed primary must come back empty)."""
    made = folder / f"server-{port}"
    made.mkdir()
    return ("--dir", str(made))


class SentinelSet:
    """A primary, ``replicas`` replicas of it and three sentinels (quorum 2) monitoring it as ``mymaster``."""

    def __init__(self, folder: Path, replicas: int = 2, tls: Certificates | None = None) -> None:
        binary = require_redis()
        sentinel = require_binary("redis-sentinel")
        count = 1 + replicas + 3
        ports = _distinct_ports(count * (2 if tls else 1))
        self.tls = tls
        # What the sentinels name each plain port by: itself, or its TLS port.
        self.named_as = dict(zip(ports[:count], ports[count:] if tls else ports, strict=True))
        own = {port: (*_own_dir(folder, port), *_REPLICATION, *(_tls_args(tls, self.named_as[port]) if tls else ()))
               for port in ports[:1 + replicas]}
        self.primary = RedisServer(binary, ports[0], own[ports[0]])
        self.replicas = [RedisServer(binary, port, (*own[port], "--replicaof", "127.0.0.1",
                                                    str(self.named_as[self.primary.port])))
                         for port in ports[1:1 + replicas]]
        self.sentinels = [Sentinel(sentinel, folder, self.named_as[self.primary.port], port,
                                   _TLS_CONF.format(tls_port=self.named_as[port], certificates=tls) if tls else "")
                          for port in ports[1 + replicas:count]]

    @property
    def servers(self) -> list[RedisServer]:
        return [self.primary, *self.replicas]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{self.named_as[sentinel.port]}" for sentinel in self.sentinels)
        if self.tls is None:
            return f"redis+sentinel://{hosts}/{SERVICE}/0"
        c = self.tls
        return (f"rediss+sentinel://{hosts}/{SERVICE}/0?ssl_ca_certs={c.ca}&ssl_cert_reqs=required"
                f"&ssl_certfile={c.client_cert}&ssl_keyfile={c.client_key}&ssl_password={KEY_PASSPHRASE}")

    def start(self) -> None:
        for server in self.servers:
            server.start()
        for sentinel in self.sentinels:
            sentinel.start()
        self.until_settled()

    def until_settled(self) -> None:
        """Return once the primary the sentinels name has every other server in sync as its replica, and every
        sentinel knows them and the other sentinels."""
        def settled() -> bool:
            port = self.primary_port()
            if port is None:
                return False
            replication = ask(port, "INFO", "replication")
            if int(replication.get("connected_slaves", 0)) != len(self.servers) - 1:
                return False
            for server in self.servers:
                if server.port != port and ask(server.port, "INFO", "replication").get("master_link_status") != "up":
                    return False
            return all(int(sentinel.master()["num-slaves"]) == len(self.servers) - 1
                       and int(sentinel.master()["num-other-sentinels"]) == len(self.sentinels) - 1
                       for sentinel in self.sentinels)
        wait_until(settled, "every replica in sync and known to every sentinel", SETTLE_TIMEOUT_S)

    def primary_port(self, among: list[Sentinel] | None = None) -> int | None:
        """The primary's (plain) port if every sentinel (of ``among``) names the same one, else None."""
        named = {sentinel.named() for sentinel in among or self.sentinels}
        plain = {tls: port for port, tls in self.named_as.items()}
        return plain[named.pop()] if len(named) == 1 else None

    def server(self, port: int) -> RedisServer:
        return next(server for server in self.servers if server.port == port)

    def until_switched(self, old: int, among: list[Sentinel] | None = None) -> int:
        """Return the new primary's port once every sentinel (of ``among``) names one other than ``old``."""
        def switched() -> int | None:
            port = self.primary_port(among)
            return port if port not in (None, old) else None
        return wait_until(switched, f"the sentinels to name a primary other than port {old}", FAILOVER_TIMEOUT_S)

    def replication(self, port: int) -> dict[str, Any]:
        """What the server on ``port`` says of its replication (``INFO replication``), or the error asking it."""
        try:
            return dict(ask(port, "INFO", "replication"))
        except Exception as error:  # noqa: BLE001 - said in a failure's message, whatever it was
            return {"error": repr(error)}

    def until_followed(self, port: int) -> None:
        """Return once the primary on ``port`` has a replica online (the sentinels point the others at a promoted
        replica after the switch; ``min_replicas=1`` has nobody to acknowledge a round before that)."""
        def followed() -> bool:
            said = self.replication(port)
            return any(key.startswith("slave") and isinstance(value, dict) and value.get("state") == "online"
                       for key, value in said.items())
        wait_until(followed, lambda: f"a replica online at the new primary {port}: {self.replication(port)}",
                   FAILOVER_TIMEOUT_S)

    def cut_replication(self) -> None:
        """Stop the primary replicating to anyone: its replicas' links are dropped and refused from now on (their
        user turned off), so whatever it takes next is on no replica."""
        ask(self.primary.port, "ACL", "SETUSER", _REPLICATOR, "off")
        ask(self.primary.port, "CLIENT", "KILL", "USER", _REPLICATOR)
        wait_until(lambda: int(ask(self.primary.port, "INFO", "replication")["connected_slaves"]) == 0,
                   "the primary to have no replica left", SETTLE_TIMEOUT_S)

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        for server in self.servers:
            server.stop()


def kill(server: RedisServer) -> None:
    """SIGKILL ``server`` (a crash) and wait for it to be gone; ``server.start()`` brings it back, empty."""
    proc, server.proc = server.proc, None
    if proc is not None:
        proc.kill()
        proc.wait(STOP_TIMEOUT_S)
        if proc.stderr:
            proc.stderr.close()


@contextlib.contextmanager
def running_sentinels(folder: Path, replicas: int = 2, tls: Certificates | None = None) -> Iterator[SentinelSet]:
    """A started ``SentinelSet`` in ``folder``, stopped on exit."""
    made = SentinelSet(folder, replicas, tls)
    try:
        made.start()
        yield made
    finally:
        made.stop()
