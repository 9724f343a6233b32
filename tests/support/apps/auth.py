"""The app the authorization tests serve with uvicorn; this module holds no tests.

``app`` mounts, on the token log ``TOKENWIRE_TEST_LOG`` names (memory when
unset, Redis for the two-process tests), ``TokenStreams`` apps whose
``authorize`` reads a bearer token (``TOKENS``: Alice's and Bob's; Mallory's
raises ``PermissionError``; anything else is None):

- ``/model``: ``support.apps.parts.model`` (``takeover="continue"``), which records
  each call (the headers and the principal it was handed too) in the file
  ``TOKENWIRE_TEST_CALLS`` names;
- ``/canned``: the canned answer, with the same ``authorize``.

Run by uvicorn with ``--app-dir tests``: ``support.apps.auth:app``.
"""

from __future__ import annotations

import os

from support.apps.parts import model, prefix_app
from tokenwire.asgi import Access, TokenStreams

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
FORBIDDEN = "mallory-token"
_LOG = os.environ.get("TOKENWIRE_TEST_LOG") or "memory"


async def authorize(access: Access) -> str | None:
    """The principal of ``Authorization: Bearer <token>`` (an async hook, as a session lookup would be)."""
    scheme, _, token = access.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    if token == FORBIDDEN:
        raise PermissionError("mallory may not use this service")
    return TOKENS.get(token)


MOUNTS = {"/model": TokenStreams(model, log=_LOG, takeover="continue", authorize=authorize),
          "/canned": TokenStreams(log=_LOG, authorize=authorize)}

app = prefix_app(MOUNTS)
