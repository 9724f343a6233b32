"""Who may: the ``authorize`` hook a ``TokenStreams`` app is given, asked once per request, and who owns a stream.

How this works: ``Endpoints.decide`` finds the route, then (when the app has
an ``authorize`` hook) calls ``ask`` with an ``Access``: the route's
``action`` (``create``, ``read``, ``stop``, ``scrape``), the request's
headers (a read-only mapping, lower-case names) and the stream's id when the
path names one.  The hook returns the principal (any ``str``: a user id, a tenant) or
None; None is a 401 with a ``WWW-Authenticate`` challenge (RFC 9110 asks one
of every 401), a ``PermissionError`` a 403 with the hook's message; anything
else it raises is a 500 naming its type (the rest goes to the log only, with
the request's credentials taken out: ``KeyError: '<the token>'`` is what a
hook that looks a token up in a dict raises).
The principal a stream was created by is kept in its meta in the token log
(``PRINCIPAL_KEY``, memory or Redis), so every process, and a continuation,
holds a read or a stop to it: anyone else gets ``UnknownStream``, the very
404 of an id that does not exist, so nothing is learned by guessing.

A server without a hook (``tokenwire serve``) asks nobody: whoever holds a
stream's id reads it.

A request's headers are a ``Headers`` mapping that knows which of its names
are credentials: ``SECRET_HEADERS`` and those the app keeps out of its log
(``keep_out_of_log``: a name a deployer adds there is a secret too).  So the
``Access`` and the ``StreamRequest`` that hold it, their reprs, and every
traceback logged about them (``shown``, ``redacted``, ``told``) hide the
same headers, without the set being passed to each.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import re
import traceback
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.tokenlog import UnknownStream
from .params import RequestError

__all__ = ["DEFAULT_CHALLENGE", "PRINCIPAL_KEY", "SECRET_HEADERS", "Access", "Authorize", "Headers", "ask",
           "chat_name", "check_owner", "header_map", "owner_meta", "redacted", "shown", "told"]

# The meta key a stream's principal (its creator's, as ``authorize`` named it) is kept under in the token log.
PRINCIPAL_KEY = "principal"
# What a 401 names in ``WWW-Authenticate`` unless the app says otherwise: a bearer token, the common API scheme.
DEFAULT_CHALLENGE = 'Bearer realm="tokenwire"'
# The headers whose values are credentials: no log line and no repr shows them, and a continuable stream's
# logged request leaves them out (``keep_out_of_log``'s default).  HTTP's own, then the API keys and tokens
# the common APIs and gateways take (OpenAI's and Anthropic's ``x-api-key``, Azure's ``api-key``, Google's,
# AWS's session token, Azure API Management's and Functions' keys), the session and anti-CSRF tokens web
# front ends send, and those an authenticating proxy (oauth2-proxy, AWS ALB, Google IAP, Cloudflare Access)
# forwards.
SECRET_HEADERS = (
    "authorization", "proxy-authorization", "cookie", "set-cookie",
    "x-api-key", "api-key", "x-goog-api-key", "x-amz-security-token", "ocp-apim-subscription-key",
    "x-functions-key", "private-token", "x-auth-token", "x-access-token", "x-session-token", "x-csrf-token",
    "x-xsrf-token", "x-forwarded-access-token", "x-auth-request-access-token", "x-amzn-oidc-accesstoken",
    "x-amzn-oidc-data", "x-goog-iap-jwt-assertion", "cf-access-jwt-assertion", "cf-access-token",
)
# The same, as the set every request's headers start from (built once, not per request).
_SECRET = frozenset(SECRET_HEADERS)
_REDACTED = "[redacted]"
# A credential shorter than this is no secret worth hiding, and hiding it would garble the line ("1" everywhere).
_SHORTEST = 4

logger = logging.getLogger("tokenwire")


@dataclass(frozen=True, slots=True)
class Access:
    """What a request asks for, as the ``authorize`` hook sees it.

    action: the route's (``create``, ``read``, ``stop``, ``scrape``); headers: the
    request's headers, lower-case names, a name sent twice as its values
    joined by ``", "`` (``"; "`` for ``cookie``); stream_id: the id the path
    names, as sent (a stream's, or on ``/chat/<id>/stream`` a chat's; None
    for a route that creates a stream).
    """

    action: str
    headers: Mapping[str, str]
    stream_id: str | None = None

    def __repr__(self) -> str:          # a hook that logs its Access logs no credentials
        return f"Access(action={self.action!r}, headers={shown(self.headers)!r}, stream_id={self.stream_id!r})"


Authorize = Callable[[Access], "str | None | Awaitable[str | None]"]


class Headers(Mapping[str, str]):
    """A request's headers, read-only (lower-case names), and ``secret``: the names whose values are credentials
    (``SECRET_HEADERS`` and any more given), which ``shown``, ``redacted`` and ``told`` hide."""

    __slots__ = ("_values", "secret")

    def __init__(self, values: Mapping[str, str], secret: Iterable[str] = ()) -> None:
        self._values = dict(values)
        self.secret = _SECRET.union(secret) if secret else _SECRET

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Headers({shown(self)!r})"


def header_map(headers: tuple[tuple[str, str], ...], secret: Iterable[str] = ()) -> Headers:
    """``headers`` (lower-case name, value pairs) as ``Headers``, a repeated name's values joined; ``secret``:
    the names whose values are credentials besides ``SECRET_HEADERS`` (the app's ``keep_out_of_log``)."""
    joined: dict[str, str] = {}
    for name, value in headers:
        if name in joined:
            joined[name] += ("; " if name == "cookie" else ", ") + value
        else:
            joined[name] = value
    return Headers(joined, secret)


def _secret(headers: Mapping[str, str]) -> frozenset[str]:
    """The names whose values ``headers`` holds as credentials: its own ``secret``, else ``SECRET_HEADERS``."""
    return headers.secret if isinstance(headers, Headers) else _SECRET


async def ask(authorize: Authorize, access: Access, challenge: str = DEFAULT_CHALLENGE) -> str:
    """The principal ``authorize`` names for ``access`` (awaited if the hook is async).

    Raises ``RequestError``: 401 (with ``WWW-Authenticate: challenge``) when
    it returns None, 403 when it raises ``PermissionError``, 500 when it
    raises anything else or returns something that is not a ``str``.
    """
    try:
        made: Any = authorize(access)
        principal = await made if inspect.isawaitable(made) else made
    except PermissionError as exc:
        reason = f": {exc}" if str(exc) else ""
        raise RequestError(403, f"not allowed to {access.action}{reason}") from None
    except Exception as exc:
        logger.error("the authorize hook raised %s\n%s", type(exc).__name__, told(exc, access.headers))
        raise RequestError(500, f"the authorize hook raised {type(exc).__name__}") from None
    if principal is None:
        raise RequestError(401, f"credentials needed to {access.action}: the request carries none this server "
                                f"accepts", (("WWW-Authenticate", challenge),))
    if not isinstance(principal, str):
        logger.error("the authorize hook returned %s; it must return a str (the principal) or None",
                     redacted(repr(principal), access.headers))
        raise RequestError(500, f"the authorize hook returned {type(principal).__name__}, not a str or None")
    return principal


def owner_meta(principal: str | None) -> dict[str, str]:
    """What a new stream's meta keeps of who made it: ``{PRINCIPAL_KEY: principal}``, nothing without one."""
    return {} if principal is None else {PRINCIPAL_KEY: principal}


def chat_name(principal: str | None, chat_id: str) -> str:
    """The name ``chat_id`` is remembered under: the principal's own (two users' chats may share an id)."""
    if principal is None:
        return chat_id
    return f"{hashlib.sha256(principal.encode()).hexdigest()[:16]}.{chat_id}"


def check_owner(meta: Mapping[str, Any], principal: str | None, stream_id: str) -> None:
    """Raise ``UnknownStream`` (the 404 of an id never made) unless ``meta`` says ``principal`` made the stream."""
    if meta.get(PRINCIPAL_KEY) != principal:
        raise UnknownStream(stream_id)


def shown(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with the value of each secret header (``Headers.secret``) replaced by ``[redacted]``."""
    secret = _secret(headers)
    return {name: _REDACTED if name in secret else value for name, value in headers.items()}


def redacted(text: str, headers: Mapping[str, str]) -> str:
    """``text`` with every credential ``headers`` carry replaced by ``[redacted]``.

    A credential is a secret header's value (``Headers.secret``), each of
    the values a header sent twice joins with ", " and an ``Authorization``'s
    credentials after its scheme, and each cookie's value (of 4 characters or more).
    """
    found: set[str] = set()
    for name in _secret(headers):
        value = headers.get(name, "").strip()
        found.add(value)
        if name in ("cookie", "set-cookie"):       # no cookie value holds ';' or ',' (RFC 6265), which join them
            found.update(pair.partition("=")[2].strip().strip('"') for pair in re.split("[;,]", value))  # quotes
        else:                                      # a credential holds no ',' (RFC 9110's token68), which joins them
            for one in (part.strip() for part in value.split(",")):
                found.update((one, one.partition(" ")[2].strip()))
    for secret in sorted((one for one in found if len(one) >= _SHORTEST), key=len, reverse=True):  # whole, then parts
        text = text.replace(secret, _REDACTED)
    return text


def told(exc: BaseException, headers: Mapping[str, str]) -> str:
    """``exc``'s traceback as a log line shows it, without the credentials ``headers`` carry (``redacted``)."""
    return redacted("".join(traceback.format_exception(exc)).rstrip(), headers)
