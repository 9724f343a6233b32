"""The app the cross-origin browser test serves with uvicorn; this module holds no tests.

``app`` is the deployment example (``examples/deploy.py``) as it is: its
model behind ``authorize`` at ``/tokens`` and Starlette's ``CORSMiddleware``
as the README shows it, configured by the environment
(``FRONT_END_ORIGIN``, ``API_TOKENS``).  The test adds one mount behind the
same middleware, ``/open``: the canned answer with no ``authorize``, which
an ``EventSource`` without credentials reads.  Run by uvicorn with
``--app-dir tests``: ``support.apps.cors:app``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

from deploy import app  # noqa: E402  (examples/ is not a package)

from tokenwire.asgi import TokenStreams  # noqa: E402

app.mount("/open", TokenStreams())

__all__ = ["app"]
