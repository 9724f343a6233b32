"""The apps the continuation and serverless tests serve with uvicorn; this module holds no tests.

``app`` mounts, on the token log ``TOKENWIRE_TEST_LOG`` names (Redis):

- ``/continued``: a model (``TokenStreams(..., takeover="continue")``) that
  yields ``" t<i>"`` for ``i`` from ``request.start`` to ``n - 1``, each
  after ``delay_ms``; every call of its factory appends one JSON line to the
  file ``TOKENWIRE_TEST_CALLS`` names (``support.apps.parts.record``: the stream, the
  pid, ``start`` and the ``prefix`` it was handed), so a test reads what
  each process was given even after the process was killed;
- ``/ended``: the same model with the default takeover (a dead owner ends
  the stream with ``"owner lost"``);
- ``/another``: another model (``" y<i>"``, its calls recorded with
  ``"model": "another"``), also with ``takeover="continue"``: it must never
  continue a stream the first model made;
- ``/canned``: the canned answer.

``TOKENWIRE_TEST_GRACE_S`` sets their shutdown grace.  Run by uvicorn with ``--app-dir tests``:
``support.apps.serverless:app``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

from support.apps.parts import counting, prefix_app
from tokenwire.asgi import StreamRequest, TokenStreams

_LOG = os.environ.get("TOKENWIRE_TEST_LOG") or "memory"
_GRACE_S = float(os.environ.get("TOKENWIRE_TEST_GRACE_S", "10"))


async def model(request: StreamRequest) -> AsyncIterator[str]:
    """Tokens ``" t<start>"`` .. ``" t<n-1>"``, each after ``delay_ms``: a continuation picks up at ``start``."""
    return counting(request)


async def another_model(request: StreamRequest) -> AsyncIterator[str]:
    """Another answer, ``" y<start>"`` ..: what a continuation by the wrong model would splice in."""
    return counting(request, word="y", model="another", delay_s=0.005)


continued = TokenStreams(model, log=_LOG, takeover="continue", grace_s=_GRACE_S)
another = TokenStreams(another_model, log=_LOG, takeover="continue", grace_s=_GRACE_S)
ended = TokenStreams(model, log=_LOG, grace_s=_GRACE_S)
canned = TokenStreams(log=_LOG, grace_s=_GRACE_S)


MOUNTS = {"/continued": continued, "/ended": ended, "/another": another, "/canned": canned}

app = prefix_app(MOUNTS)
