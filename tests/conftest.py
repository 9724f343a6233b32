"""Shared test helpers.

``require_binary(name)`` (from ``support.requirements``, re-exported here) is how a test asks for an external
program (``chromium``, ``redis-server``, ``curl``): it returns the program's path, or skips the test with the
reason when the program is missing, except that with ``TOKENWIRE_REQUIRE_ALL=1`` (as ``.ci/run`` sets) a missing
program is a failure, so CI cannot go green by skipping.  The Redis fixtures of
``support.redis`` are registered here as a plugin: a test names one as a
parameter, without importing it.
"""

from __future__ import annotations

import pytest
from support.requirements import REQUIRE_ALL_ENV, require_all, require_binary

from tokenwire.realtime import LOOP_ENV

__all__ = ["REQUIRE_ALL_ENV", "loop_kind", "require_all", "require_binary"]

# The Redis fixtures (redis_session, redis_server, own_redis), for every test module that names one.
pytest_plugins = ["support.redis"]


@pytest.fixture(params=["asyncio", "uvloop"])
def loop_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test on the stdlib's loop and on uvloop (the ``fast`` extra)."""
    if request.param == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop (the 'fast' extra) is not installed")
    monkeypatch.setenv(LOOP_ENV, request.param)
    return str(request.param)
