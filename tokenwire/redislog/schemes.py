"""The URL schemes of a Redis log, and how a message names them (imports nothing: every face reads them)."""

from __future__ import annotations

__all__ = ["REDIS_SCHEMES", "either"]

# TCP, TLS, a local socket (redis-py's from_url), a primary its sentinels name (``sentinel``), over TLS too.
REDIS_SCHEMES = ("redis://", "rediss://", "unix://", "redis+sentinel://", "rediss+sentinel://")


def either(schemes: tuple[str, ...]) -> str:
    """``schemes`` as a message names them: ``redis://, rediss:// or unix://``."""
    return f"{', '.join(schemes[:-1])} or {schemes[-1]}"
