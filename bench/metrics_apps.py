"""Item 12's uvicorn apps: the canned answer's ``TokenStreams`` (``tokenwire.asgi:app``'s) with metrics on and off."""

from tokenwire.asgi import TokenStreams

on = TokenStreams(metrics=True)
off = TokenStreams(metrics=False)
