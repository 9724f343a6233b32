"""How a continuable stream's request is kept in its log's meta, so that another process can call the factory
again with it (``TokenStreams(takeover="continue")``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from ..endpoints.access import PRINCIPAL_KEY
from ..endpoints.chat import parse_chat
from ..endpoints.openai import parse_openai
from ..endpoints.params import RequestError
from .request import StreamRequest

__all__ = ["REQUEST_KEY", "request_from_meta", "request_to_meta"]

# The meta key a continuable stream's request is kept under.
REQUEST_KEY = "request"


def request_to_meta(request: StreamRequest) -> dict[str, Any]:
    """The JSON-able record of ``request`` a continuable stream keeps in its meta (the body as base64).

    A chat's request keeps only that it was one: its ``chat`` is read again
    from the body.  Its headers are kept as given: the caller has taken out
    those kept out of the log (``ModelMaker.logged``); the principal is the
    meta's own.
    """
    return {"params": dict(request.params), "body": base64.b64encode(request.body).decode("ascii"),
            "client": request.client, "chat": request.chat is not None, "headers": dict(request.headers),
            "openai": None if request.openai is None else request.openai.api}


def request_from_meta(stream_id: str, meta: Mapping[str, Any]) -> StreamRequest | None:
    """The request kept by ``request_to_meta`` in a stream's meta; None if it keeps none (or a bad one)."""
    kept = meta.get(REQUEST_KEY)
    if not isinstance(kept, dict):
        return None
    try:
        params = {str(k): str(v) for k, v in dict(kept["params"]).items()}
        body = base64.b64decode(kept["body"])
        chat = parse_chat(body) if kept.get("chat") else None
        api = kept.get("openai")
        openai = parse_openai(body, str(api)) if api else None
        headers = {str(k): str(v) for k, v in dict(kept.get("headers", {})).items()}
        principal = meta.get(PRINCIPAL_KEY)
        return StreamRequest(stream_id, params, body, str(kept["client"]), chat=chat, headers=headers,
                             principal=None if principal is None else str(principal), openai=openai)
    except (KeyError, TypeError, ValueError, RequestError):
        return None
