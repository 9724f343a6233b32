"""A log URL (or any URL: ``tokenwire read``'s, an upstream's) as output may show it: the password replaced
with ``***``, everything else kept.

How this works: ``redact_url`` is what banners, log lines and error
messages print instead of a log URL (``redis://default:***@host:6379/0``):
the host, port and database stay, since an operator needs them to find the
Redis, and the secret goes, whether it is in the userinfo or a ``password``
query parameter (redis-py passes any query parameter on).  The userinfo is
everything after the scheme up to the last ``@`` (a password with an
unencoded ``/`` is still all hidden); one with no ``:`` is all replaced
(``redis://***@host``), as a password written there by mistake is still a
password.  ``scrub`` takes the URL's password
out of any other text (an exception's message from redis-py), in case it
carries it.  Client-facing answers show neither: they say only that the
token log is unavailable (``endpoints.rules.log_error``).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "redact_url", "scrub"]

MASK = "***"
# Query parameters redis-py would take as a secret.
_SECRET_PARAMS = frozenset({"password"})


def _split(url: str) -> tuple[str, str | None, str]:
    """``url`` as what comes before its userinfo, the userinfo (None: none) and the rest."""
    scheme, sep, rest = url.partition("://")
    head, rest = (scheme + sep, rest) if sep else ("", url)
    userinfo, at, after = rest.rpartition("@")
    return (head, userinfo, after) if at else (head, None, rest)


def _secrets(url: str) -> list[str]:
    """Every password ``url`` carries, as written, unquoted and quoted (for ``scrub``)."""
    _, userinfo, _ = _split(url)
    found = [] if userinfo is None else [userinfo.partition(":")[2] if ":" in userinfo else userinfo]
    query = url.partition("#")[0].partition("?")[2]      # not urlsplit: it refuses an unclosed [
    found += [value for key, value in parse_qsl(query, keep_blank_values=True) if key in _SECRET_PARAMS]
    return [text for secret in found if secret for text in {secret, unquote(secret), quote(secret, safe="")}]


def redact_url(url: str) -> str:
    """Return ``url`` with its password (userinfo or ``password=`` parameter) shown as ``***``."""
    head, userinfo, rest = _split(url)
    if userinfo is not None:
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:{MASK}@{rest}" if colon else f"{MASK}@{rest}"
    try:
        parts = urlsplit(head + rest)
    except ValueError:                        # an unclosed [ of an IPv6 host: still shown, without a password
        return scrub(head + rest, url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if not any(key in _SECRET_PARAMS for key, _ in query):
        return head + rest
    shown = urlencode([(key, MASK if key in _SECRET_PARAMS else value) for key, value in query], safe="*")
    return urlunsplit(parts._replace(query=shown))


def scrub(text: str, url: str) -> str:
    """Return ``text`` with every password of ``url`` in it replaced by ``***``."""
    for secret in sorted(_secrets(url), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
