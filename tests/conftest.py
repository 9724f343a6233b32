"""Shared test helpers.

``require_binary(name)`` is how a test asks for an external program
(``chromium``, ``redis-server``, ``curl``): it returns the program's path,
or skips the test with the reason when the program is missing, except that
with ``TOKENWIRE_REQUIRE_ALL=1`` (as ``.ci/run`` sets) a missing program is
a failure, so CI cannot go green by skipping.  The Redis fixtures of
``support.redis`` are registered here as a plugin: a test names one as a
parameter, without importing it.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tokenwire.realtime import LOOP_ENV

# The Redis fixtures (redis_session, redis_server, own_redis), for every test module that names one.
pytest_plugins = ["support.redis"]

REQUIRE_ALL_ENV = "TOKENWIRE_REQUIRE_ALL"


def require_all() -> bool:
    """True when every external program must be present (``TOKENWIRE_REQUIRE_ALL=1``)."""
    return os.environ.get(REQUIRE_ALL_ENV) == "1"


def require_binary(name: str) -> str:
    """Return the path of executable ``name``; skip the test if it is missing (fail under REQUIRE_ALL)."""
    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"{name!r} is not installed (not on PATH); install it to run this test"
    if require_all():
        pytest.fail(f"{reason}; {REQUIRE_ALL_ENV}=1 makes a missing program a failure, not a skip",
                    pytrace=False)
    pytest.skip(reason)


@pytest.fixture(params=["asyncio", "uvloop"])
def loop_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test on the stdlib's loop and on uvloop (the ``fast`` extra)."""
    if request.param == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop (the 'fast' extra) is not installed")
    monkeypatch.setenv(LOOP_ENV, request.param)
    return str(request.param)
