"""Reading an ASGI request and writing a whole answer: the small, pure-ish parts of the ASGI edge.

How this works: an ASGI server hands the app a ``scope`` dict (method, path,
``root_path``, raw query bytes, headers as lower-case byte pairs, client)
and two coroutines.  These functions read the scope as ``tokenwire serve``
reads its h11 request (the target and header values decoded the same way,
so the same input gives the same messages), read a bounded body, and send a
complete answer.  The path a route sees is the one under ``root_path``:
Starlette's ``Mount`` leaves the full path in ``path`` and adds the mount
point to ``root_path``, other servers give the rest of the path only, and
both work.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from ..endpoints.decisions import LiveRequest
from ..endpoints.params import utf8
from ..endpoints.rules import body_error
from .wire import Receive, Send

__all__ = ["answer", "asgi_headers", "client", "header_values", "live_request", "query", "read_body", "root_path",
           "route_path"]

Scope = Mapping[str, Any]
# What ``quote`` leaves as is when a server gives no ``raw_path``: RFC 3986's pchar and '/'.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def root_path(scope: Scope) -> str:
    """Where the app is mounted ("" at the top)."""
    return str(scope.get("root_path", ""))


def route_path(scope: Scope) -> str:
    """The request's path under the mount point (``root_path``), as sent: still percent-encoded.

    ``raw_path`` when the server gives it (uvicorn does; ``path`` is decoded
    already), so the endpoints decode it once by their own rule
    (``routes.routed_path``), as ``tokenwire serve`` does with its target.
    """
    root = root_path(scope)
    raw = scope.get("raw_path")
    if raw is None:
        path = urllib.parse.quote(str(scope["path"]), safe=_PATH_SAFE)
    else:
        path = utf8(bytes(raw).decode("latin-1"))
    root = urllib.parse.quote(root, safe=_PATH_SAFE)
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root):]
    return path


def query(scope: Scope) -> str:
    """The query string, decoded as ``tokenwire serve`` decodes a request target (UTF-8, bad bytes as U+FFFD)."""
    return utf8(bytes(scope.get("query_string", b"")).decode("latin-1"))


def header_values(scope: Scope, name: bytes) -> list[str]:
    """Every value of header ``name`` (lower-case bytes), as Latin-1 text."""
    return [bytes(value).decode("latin-1") for key, value in scope.get("headers", ()) if bytes(key).lower() == name]


def live_request(scope: Scope) -> LiveRequest:
    """The request the endpoints read: method, path under the mount, query, headers, client, mount point."""
    headers = tuple((bytes(key).decode("latin-1").lower(), bytes(value).decode("latin-1"))
                    for key, value in scope.get("headers", ()))
    return LiveRequest(str(scope["method"]), route_path(scope), query(scope), headers, client(scope),
                       root_path(scope))


def client(scope: Scope) -> str:
    """The client's address ("-" when the server does not say)."""
    peer = scope.get("client")
    return str(peer[0]) if peer else "-"


async def read_body(receive: Receive, limit: int) -> bytes:
    """Read the request body; raises ``RequestError`` 413 past ``limit`` bytes."""
    body = bytearray()
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            return bytes(body)                     # the client left before the body was whole
        body += message.get("body", b"")
        if len(body) > limit:
            raise body_error(limit)
        if not message.get("more_body", False):
            return bytes(body)


def asgi_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Headers as ASGI wants them: lower-case names, Latin-1 bytes."""
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]


async def answer(send: Send, status: int, headers: Iterable[tuple[str, str]], body: bytes = b"", *,
                 head: bool = False) -> None:
    """Send a whole response (with its ``Content-Length``); ``head``: the headers ``GET`` gets, no body."""
    fields = asgi_headers(headers)
    if status not in (204, 304):
        fields.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": b"" if head else body, "more_body": False})
