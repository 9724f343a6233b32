"""The checks of a request head before h11 reads it: this server's limits, and its route's on a body.

How this works: ``precheck`` reads the head as it arrives (the request line
at its first LF, the header lines up to the blank line that ends them, each
line ended by CRLF or a bare LF, as h11 reads them) and answers what it
refuses: a request line past ``MAX_REQUEST_LINE`` 414, headers past
``MAX_HEADER_BYTES`` or ``MAX_HEADERS`` lines 431, an HTTP/0.9 line or one
that is not three words 400, a method no route takes 501, and the body its
header lines declare (``Route.check_body`` on a route that reads one; on one
that reads none the framing rule of every route and what h11 would refuse),
each naming the value, in the error format of the route at the request's
path (``refused``), plain text elsewhere (``text_answer``).
"""

from __future__ import annotations

import re

import h11

from ..endpoints.config import MAX_HEADER_BYTES, MAX_REQUEST_LINE
from ..endpoints.decide import refusal
from ..endpoints.decisions import Answer
from ..endpoints.params import RequestError, echo, utf8
from ..endpoints.routes import Route, RouteTable
from ..endpoints.rules import KNOWN_METHODS, check_transfer_encoding, declared_length, not_implemented_error

__all__ = ["MAX_HEADERS", "precheck", "protocol_error", "refused", "target_path", "text_answer"]

# More header lines than any browser sends (20-30); 100 is http.server's own limit.
MAX_HEADERS = 100
_VERSION = re.compile(rb"HTTP/1\.[01]")
# The blank line that ends a head, found as h11 finds it: a line may end with CRLF or a bare LF (RFC 9112 §2.2).
_HEAD_END = re.compile(rb"\n\r?\n")
# The most digits h11 reads in a Content-Length (its own bound, past any body): a longer one is refused before
# h11 sees it, on a route that reads no body too, so that the answer is in the route's format and names it.
_H11_LENGTH_DIGITS = 20
# h11 quotes a malformed header line whole (``illegal header line: bytearray(b'Authorization : Bearer ...')``):
# the answer names the header and leaves out its value, which may be a credential.
_HEADER_LINE = re.compile(r"illegal header line: bytearray\(b['\"]([^:\s'\"\\]*)")


def protocol_error(exc: h11.RemoteProtocolError) -> str:
    """What h11 found wrong with a request, without the value of a malformed header line."""
    line = _HEADER_LINE.match(str(exc))
    if line is None:
        return str(exc)
    return (f"illegal header line {echo(line.group(1))}: a header is its name, ':' right after it, then its value "
            f"(not shown here)")


def text_answer(status: int, message: str, extra: tuple[tuple[str, str], ...] = ()) -> Answer:
    """A one-line plain-text error (what a request that never reached a route gets)."""
    headers = (("Content-Type", "text/plain; charset=utf-8"), ("X-Content-Type-Options", "nosniff"),
               ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-store"), *extra)
    return Answer(status, headers, f"{status} {message}\n".encode("utf-8", "replace"))


def precheck(buf: bytes, routes: RouteTable) -> Answer | None:
    """This server's limits on a request head so far, and its route's on a body; None while it is within them."""
    end = buf.find(b"\n")
    line = buf if end < 0 else buf[:end].rstrip(b"\r")
    if len(line) > MAX_REQUEST_LINE:
        return text_answer(414, f"request line longer than {MAX_REQUEST_LINE} bytes")
    if end < 0:
        return None
    words = line.split(b" ")
    if len(words) == 2:
        return text_answer(400, "HTTP/0.9 requests are not served; send HTTP/1.0 or HTTP/1.1")
    if len(words) != 3:
        return text_answer(400, f"malformed request line {utf8(line[:80].decode('latin-1'))!r}")
    if not _VERSION.fullmatch(words[2]):
        return text_answer(400, f"unsupported HTTP version {words[2][:20].decode('latin-1')!r}; "
                                "send HTTP/1.0 or HTTP/1.1")
    method, path = words[0].decode("latin-1"), target_path(words[1])
    if method not in KNOWN_METHODS:
        return refused(not_implemented_error(method), routes, path)
    stop = _HEAD_END.search(buf, end)
    fields = buf[end + 1: None if stop is None else stop.start()]
    if len(fields) > MAX_HEADER_BYTES or fields.count(b"\n") >= MAX_HEADERS:
        return text_answer(431, f"request headers longer than {MAX_HEADER_BYTES} bytes or {MAX_HEADERS} lines")
    if stop is None:
        return None
    try:
        _check_framing(routes.body_route(path, method), fields)
    except RequestError as exc:
        return refused(exc, routes, path)
    return None


def target_path(target: bytes) -> str:
    """The path of a request ``target`` as sent (Latin-1 bytes), as the route table reads it."""
    return utf8(target.partition(b"?")[0].decode("latin-1"))


def refused(exc: RequestError, routes: RouteTable, path: str | None) -> Answer:
    """``exc`` in the error format of the route at ``path``; plain text where none of ``routes`` answers it."""
    if path is not None and routes.claims(path):
        return refusal(exc, routes.errors_of(path))
    return text_answer(exc.status, exc.message, exc.headers)


def _check_framing(route: Route | None, fields: bytes) -> None:
    """Refuse the body the raw header lines ``fields`` declare: past its ``route``'s limits (``Route.check_body``),
    or, on a route that reads none, the rule of every route (``check_transfer_encoding``) and what h11 would
    refuse in its own words: a malformed length, one past its digits (413).  Raises ``RequestError`` naming the
    value."""
    values: dict[str, list[str]] = {}
    for line in fields.split(b"\n"):
        name, _, value = line.partition(b":")
        values.setdefault(name.strip().lower().decode("latin-1"), []).append(value.strip().decode("latin-1"))
    coding, lengths = values.get("transfer-encoding", []), values.get("content-length", [])
    if route is not None:
        route.check_body(coding, lengths)
        return
    check_transfer_encoding(coding, lengths)
    declared_length(lengths)
    digits = max((len(value.strip(" \t")) for value in lengths), default=0)
    if digits > _H11_LENGTH_DIGITS:
        raise RequestError(413, f"request body of a {digits}-digit number of bytes; this server reads a "
                                f"Content-Length of at most {_H11_LENGTH_DIGITS} digits")
