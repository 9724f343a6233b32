"""What every test gets: its markers from its folder, the Redis fixtures, and ``loop_kind``.

A test's markers come from the folder it sits in (``FOLDER_MARKERS``), so a new test in a folder gets them:
``python -m pytest -m "not slow"`` runs ``unit/`` and ``servers/`` (the fast loop), ``-m "not load and not
bench"`` everything but the load tests and the benchmarks.  A test anywhere that names a Redis fixture is
marked ``redis`` and ``slow`` too.  A test file outside these folders is a collection error naming them.

The Redis fixtures of ``support.redis`` (``redis_session``, ``redis_server``, ``own_redis``) are registered
here as a plugin: a test names one as a parameter, without importing it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenwire.realtime import LOOP_ENV

TESTS = Path(__file__).resolve().parent

# Each folder of tests/ and the markers its tests get (pyproject.toml registers them; tests/README.md says what
# each folder holds).
FOLDER_MARKERS: dict[str, tuple[str, ...]] = {
    "unit": (),
    "servers": (),
    "processes": ("slow",),
    "redis": ("redis", "slow"),
    "browser": ("browser", "slow"),
    "node": ("node", "slow"),
    "load": ("load", "slow"),
    "benchmarks": ("bench", "slow"),
}
REDIS_FIXTURES = {"redis_session", "redis_server", "own_redis"}

# The Redis fixtures (redis_session, redis_server, own_redis), for every test module that names one.
pytest_plugins = ["support.redis"]


def folder_markers(path: Path, fixtures: set[str]) -> tuple[str, ...]:
    """The markers of a test in ``path`` that names ``fixtures``; a ``ValueError`` for a file outside the folders."""
    parts = path.resolve().relative_to(TESTS).parts
    if len(parts) < 2 or parts[0] not in FOLDER_MARKERS:
        raise ValueError(f"test file {path.relative_to(TESTS.parent)} is outside the test folders: "
                         f"put it in tests/<folder>/, one of {', '.join(FOLDER_MARKERS)} (tests/README.md)")
    marks = FOLDER_MARKERS[parts[0]]
    if fixtures & REDIS_FIXTURES:
        marks = tuple(dict.fromkeys((*marks, "redis", "slow")))
    return marks


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            marks = folder_markers(item.path, set(getattr(item, "fixturenames", ())))
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None
        for name in marks:
            item.add_marker(name)


@pytest.fixture(params=["asyncio", "uvloop"])
def loop_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test on the stdlib's loop and on uvloop (the ``fast`` extra)."""
    if request.param == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop (the 'fast' extra) is not installed")
    monkeypatch.setenv(LOOP_ENV, request.param)
    return str(request.param)
