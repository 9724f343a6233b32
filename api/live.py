"""Vercel's entry point for the live page: ``/live``, its files and the live routes (rewrites in vercel.json).

Vercel's Python runtime serves ``app`` (ASGI) under uvicorn; the token log is ``$TOKENWIRE_LOG_URL``
(``redis://`` or ``rediss://``), and without it every live route answers 503 naming the setting.
"""

from tokenwire.asgi.hosted import hosted_app

app = hosted_app()

__all__ = ["app"]
