"""The app the eviction test serves with uvicorn; this module holds no tests.

``app`` mounts, on the token log ``TOKENWIRE_TEST_LOG`` names (Redis):
``/tagged``, a model continued by a take-over (``takeover="continue"``)
whose every token names the factory call that made it (``" g<pid>.<call>-<i>"``,
``support.apps.parts.counting``), so two versions of one index can be told apart at
any reader; and ``/canned``, the canned answer.  Run by uvicorn with
``--app-dir tests``: ``support.apps.eviction:app``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator

from support.apps.parts import counting, prefix_app
from tokenwire.asgi import StreamRequest, TokenStreams

_LOG = os.environ.get("TOKENWIRE_TEST_LOG") or "memory"
_CALLS = itertools.count()


async def tagged(request: StreamRequest) -> AsyncIterator[str]:
    """Tokens ``" g<pid>.<call>-<i>"`` from ``request.start`` on: each call of the factory tags its own."""
    return counting(request, word=f"g{os.getpid()}.{next(_CALLS)}-", model="tagged")


app = prefix_app({"/tagged": TokenStreams(tagged, log=_LOG, takeover="continue"), "/canned": TokenStreams(log=_LOG)})
