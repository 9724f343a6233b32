"""What an HTTP/1.0 reader of ``uvicorn tokenwire.asgi:app`` gets, under each of uvicorn's parsers, as
docs/architecture.md's intentional divergences say: with ``--http h11`` a close-delimited body (RFC 9112 §6.1);
with ``--http httptools`` uvicorn sends ``Transfer-Encoding: chunked``, which the docs name with the workaround.

If the httptools case stops holding (uvicorn frames HTTP/1.0 right), the docs' divergence is to go.
"""

from __future__ import annotations

import socket

import pytest
from support.asgi import uvicorn
from support.requirements import ROOT

TIMEOUT_S = 10.0


def http10(port: int, target: str) -> tuple[bytes, bytes]:
    """``GET target`` as HTTP/1.0, read until the server closes: the head and the body as sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.sendall(f"GET {target} HTTP/1.0\r\nHost: t\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.lower(), body


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_an_http10_readers_framing_is_as_the_docs_say(http: str) -> None:
    if http == "httptools":
        pytest.importorskip("httptools")
    with uvicorn("tokenwire.asgi:app", app_dir=ROOT, http=http) as app:
        head, body = http10(app.port, "/stream?tokens=2")
    assert head.startswith(b"http/1.1 200 ")
    chunked = b"transfer-encoding: chunked" in head
    assert chunked == (http == "httptools")
    assert body.startswith(b"retry: 750\n") != chunked          # chunked: a chunk size comes first
    assert body.rstrip().endswith(b"0" if chunked else b"}")


def test_the_docs_name_the_divergence_and_its_workaround() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    divergences = text[text.index("## Intentional divergences"):]
    assert "HTTP/1.0 readers under uvicorn's httptools" in divergences
    assert "`uvicorn tokenwire.asgi:app --http h11`" in divergences
