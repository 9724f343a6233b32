"""tokenwire as an ASGI 3 app: resumable token streams in your own Starlette or FastAPI app, from your own model.

``app`` serves the canned 277-token answer (``uvicorn tokenwire.asgi:app``),
built on its first call (a bad ``$TOKENWIRE_LOG_URL`` fails the server's
start-up, never this import);
``TokenStreams(model)`` serves your model's tokens with the same routes,
limits, errors, heartbeat and resume (the README's "Your own model" section).
"""

from __future__ import annotations

from ..endpoints.access import SECRET_HEADERS, Access
from .app import TokenStreams
from .canned import CannedApp
from .model_stream import MAX_MODEL_TOKENS, ModelFactory, ModelTokens, StreamRequest

__all__ = ["MAX_MODEL_TOKENS", "SECRET_HEADERS", "Access", "CannedApp", "ModelFactory", "ModelTokens", "StreamRequest",
           "TokenStreams", "app"]

# The canned answer with the report's parameters, on the token log $TOKENWIRE_LOG_URL names (memory if unset).
app = CannedApp()
