"""A route table with routes added, served by uvicorn (``support.apps.routes:app``) and by ``tokenwire serve``.

``EXTENDED`` is the live table plus ``/v2/streams`` (POST or PUT, a body of
at most 16 bytes under its own setting) and ``/v2/streams/<id>/events``
(OpenAI's error format): routes that exist only as data, answered by the
handlers the table names.
"""

from __future__ import annotations

from tokenwire.asgi import TokenStreams
from tokenwire.endpoints.routes import LIVE_ROUTES, Route

EXTENDED = LIVE_ROUTES.add(
    Route("/v2/streams", ("POST", "PUT"), "create", "create", body_setting="max_v2_body_bytes", body_limit=16),
    Route("/v2/streams/<id>/events", ("GET",), "events", "read", errors="openai"),
)

app = TokenStreams(routes=EXTENDED)
