"""A log URL (or any URL: ``tokenwire read``'s, an upstream's) as output may show it: every secret replaced
with ``***``, everything else kept.

How this works: ``redact_url`` is what banners, log lines, reprs and error
messages print instead of a log URL (``redis://default:***@host:6379/0``):
the host, port and database stay, since an operator needs them to find the
Redis, and the secrets go: the userinfo's password, and the value of every
query parameter whose name says it is one (``password``, ``ssl_password``,
the client key's passphrase, ``sentinel_password``: any name holding
"password" or "secret", in any case; redis-py passes any query parameter
on).  The userinfo is everything after the scheme up to the last ``@`` (a
password with an unencoded ``/`` is still all hidden; a Sentinel URL's
``user:password@`` before its list of hosts too); one with no ``:`` is all
replaced (``redis://***@host``), as a password written there by mistake is
still a password.  ``scrub`` takes the URL's secrets out of any other text
(an exception's message from redis-py), in case it carries one.
Client-facing answers show neither: they say only that the token log is
unavailable (``endpoints.rules.log_error``).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, unquote, unquote_plus

__all__ = ["MASK", "redact_url", "scrub", "secret_param"]

MASK = "***"
# What a query parameter's name holds, in any case, when its value is a secret: redis-py's ``password``,
# ``ssl_password`` (the client key's passphrase) and ``sentinel_password`` say "password"; whatever else an
# operator or a library names a secret says one of these too.
_SECRET_WORDS = ("password", "secret")


def secret_param(name: str) -> bool:
    """True if the query parameter ``name`` carries a secret (its name holds "password" or "secret")."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _split(url: str) -> tuple[str, str | None, str]:
    """``url`` as what comes before its userinfo, the userinfo (None: none) and the rest."""
    scheme, sep, rest = url.partition("://")
    head, rest = (scheme + sep, rest) if sep else ("", url)
    userinfo, at, after = rest.rpartition("@")
    return (head, userinfo, after) if at else (head, None, rest)


def _secrets(url: str) -> list[str]:
    """Every secret ``url`` carries, as written, unquoted and quoted (for ``scrub``)."""
    _, userinfo, _ = _split(url)
    found = [] if userinfo is None else [userinfo.partition(":")[2] if ":" in userinfo else userinfo]
    query = url.partition("#")[0].partition("?")[2]      # not urlsplit: it refuses an unclosed [
    found += [value for key, value in parse_qsl(query, keep_blank_values=True) if secret_param(key)]
    return [text for secret in found if secret for text in {secret, unquote(secret), quote(secret, safe="")}]


def redact_url(url: str) -> str:
    """Return ``url`` with its secrets (the userinfo's password, every secret query parameter) shown as ``***``.

    The rest stays as written (not urlsplit: it refuses an unclosed ``[`` of an IPv6 host).
    """
    head, userinfo, rest = _split(url)
    if userinfo is not None:
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:{MASK}@{rest}" if colon else f"{MASK}@{rest}"
    rest, hash_, fragment = rest.partition("#")
    path, mark, query = rest.partition("?")
    shown = path + mark + "&".join(_masked(item) for item in query.split("&")) if mark else path
    return head + shown + hash_ + fragment


def _masked(item: str) -> str:
    """One ``name=value`` of a query, its value ``***`` if its name says it is a secret."""
    name, _, _ = item.partition("=")
    return f"{name}={MASK}" if secret_param(unquote_plus(name)) else item


def scrub(text: str, url: str) -> str:
    """Return ``text`` with every secret of ``url`` in it replaced by ``***``."""
    for secret in sorted(_secrets(url), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
