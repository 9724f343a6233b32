"""A redis-server that speaks TLS and wants a client certificate (mTLS), for the tests; no tests here.

How this works: ``make_certificates(folder)`` has ``openssl`` make a CA, a
server certificate for 127.0.0.1 and a client certificate whose key is
encrypted with ``KEY_PASSPHRASE`` (what a log URL's ``ssl_password`` opens),
each signed by the CA.  ``running_tls_redis(certificates)`` starts
``redis-server`` (``support.redis.RedisServer``: its plain port is what it
is waited on, pinged through) with a TLS port beside it that refuses a client
without a certificate the CA signed; ``url`` is the ``rediss://`` URL of
that port with every certificate setting and the passphrase.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from support.redis import RedisServer, require_redis
from support.requirements import free_port, require_binary

__all__ = ["KEY_PASSPHRASE", "Certificates", "TLSRedis", "make_certificates", "running_tls_redis"]

KEY_PASSPHRASE = "hunter2"
# How long openssl may take for one key or certificate (RSA 2048: a fraction of a second).
_OPENSSL_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Certificates:
    """The files: the CA's certificate, the server's certificate and key, the client's (key encrypted)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str) -> None:
    subprocess.run([require_binary("openssl"), *args], check=True, capture_output=True, timeout=_OPENSSL_TIMEOUT_S)


def _signed(folder: Path, name: str, subject: str, ca: tuple[Path, Path], *key_args: str) -> tuple[Path, Path]:
    """A key (``key_args``: how it is kept) and a certificate for ``subject`` signed by ``ca``."""
    key, request, cert, ext = (folder / f"{name}.{kind}" for kind in ("key", "csr", "crt", "ext"))
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("req", "-newkey", "rsa:2048", *key_args, "-keyout", str(key), "-out", str(request), "-subj", subject)
    _openssl("x509", "-req", "-in", str(request), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
             "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return cert, key


def make_certificates(folder: Path) -> Certificates:
    """A CA, and server and client certificates it signed, in ``folder``; the client's key wants the passphrase."""
    ca, ca_key = folder / "ca.crt", folder / "ca.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca),
             "-days", "2", "-subj", "/CN=tokenwire test CA")
    server = _signed(folder, "server", "/CN=127.0.0.1", (ca, ca_key), "-nodes")
    client = _signed(folder, "client", "/CN=tokenwire", (ca, ca_key), "-passout", f"pass:{KEY_PASSPHRASE}")
    return Certificates(ca, *server, *client)


class TLSRedis:
    """A ``RedisServer`` with a TLS port (``tls_port``) that wants a client certificate."""

    def __init__(self, certificates: Certificates) -> None:
        self.certificates, self.tls_port = certificates, free_port()
        self.server = RedisServer(require_redis(), args=(
            "--tls-port", str(self.tls_port), "--tls-cert-file", str(certificates.server_cert),
            "--tls-key-file", str(certificates.server_key), "--tls-ca-cert-file", str(certificates.ca),
            "--tls-auth-clients", "yes"))

    def url(self, passphrase: str = KEY_PASSPHRASE) -> str:
        """The ``rediss://`` URL of the TLS port: the CA to check the server by, the client's certificate and key."""
        c = self.certificates
        return (f"rediss://127.0.0.1:{self.tls_port}/0?ssl_ca_certs={c.ca}&ssl_cert_reqs=required"
                f"&ssl_certfile={c.client_cert}&ssl_keyfile={c.client_key}&ssl_password={passphrase}")


@contextmanager
def running_tls_redis(certificates: Certificates) -> Iterator[TLSRedis]:
    redis = TLSRedis(certificates)
    redis.server.start()
    try:
        yield redis
    finally:
        redis.server.stop()
