"""What every test gets: its markers from its folder, the Redis fixtures, and ``loop_kind``.

A test's markers come from the folder it sits in (``FOLDER_MARKERS``), so a new test in a folder gets them:
``python -m pytest -m "not slow"`` runs ``unit/`` and ``servers/`` (the fast loop), ``-m "not load and not
bench"`` everything but the load tests and the benchmarks.  Wherever a test sits, what it touches adds markers: a
test file importing what starts a process (``subprocess``, ``support.asgi``'s uvicorn, ``support.redis``...,
``SPAWNING``) is ``slow``, one that can start a redis-server (``support.redis``, a Redis fixture) is ``redis`` too,
one that drives Chromium (``support.cdp``) ``browser``, one that asks for node or an npm package ``node``.  A test
file outside these folders is a usage error naming them.

The load tests (marker ``load``) run alone: each holds the machine lock exclusively
while every other test holds it shared (``pytest_runtest_protocol``), so over xdist's workers, and across pytest
runs that share ``$TOKENWIRE_MACHINE_LOCK`` (``.ci/run`` sets it for both of its runs), nothing else runs beside
one; without the variable the lock is per run (xdist's ``testrunuid``).  A load test marked ``alongside`` (the
long fuzz: it measures nothing) holds it shared.  docs/contributing.md says why.

The Redis fixtures of ``support.redis`` (``redis_session``, ``redis_server``, ``own_redis``) are registered
here as a plugin: a test names one as a parameter, without importing it.
"""

from __future__ import annotations

import ast
import fcntl
import functools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenwire.realtime import LOOP_ENV

# The markers of the tests that bound waits the machine's other work stretches, and run with nothing beside them.
# The benchmarks are not among them: their tests assert no figure, only that each item ran and read every stream
# whole, and they run beside the rest (their figures then mean little: ``python -m bench`` on a quiet machine).
ALONE_MARKERS = ("load",)
MACHINE_LOCK_ENV = "TOKENWIRE_MACHINE_LOCK"

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
# The modules that start a process (a server, a browser, redis-server, node): a test file importing one is slow.
SPAWNING = {"subprocess", "support.asgi", "support.cdp", "support.instances", "support.processes", "support.redis",
            "support.redis_tls", "support.served", "support.serverless_sim", "support.tokenwire_process"}
# Those of them that start a redis-server, or Chromium; and what a test asks for to run node or an npm package.
REDIS_MODULES = {"support.redis", "support.redis_tls", "support.instances", "support.serverless_sim"}
BROWSER_MODULES = {"support.cdp"}
NODE_NEEDS = {f"support.requirements.{name}" for name in ("require_eventsource", "require_node_package",
                                                          "require_ai_sdk")}

# The Redis fixtures (redis_session, redis_server, own_redis), for every test module that names one.
pytest_plugins = ["support.redis"]


@functools.cache
def imported(path: Path) -> frozenset[str]:
    """Every module the file at ``path`` imports, and each name it imports from one (``module.name``), wherever
    the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(found)


def markers(path: Path, fixtures: set[str], modules: frozenset[str]) -> tuple[str, ...]:
    """The markers of a test in ``path`` that names ``fixtures`` in a file importing ``modules``; a ``ValueError``
    for a file outside the folders."""
    parts = path.resolve().relative_to(TESTS).parts
    if len(parts) < 2 or parts[0] not in FOLDER_MARKERS:
        raise ValueError(f"test file {path.resolve().relative_to(TESTS.parent)} is outside the test folders: "
                         f"put it in tests/<folder>/, one of {', '.join(FOLDER_MARKERS)} (tests/README.md)")
    marks = list(FOLDER_MARKERS[parts[0]])
    if fixtures & REDIS_FIXTURES or modules & REDIS_MODULES:
        marks += ["redis", "slow"]
    if modules & BROWSER_MODULES:
        marks += ["browser", "slow"]
    if modules & NODE_NEEDS:
        marks += ["node", "slow"]
    if modules & SPAWNING:
        marks.append("slow")
    return tuple(dict.fromkeys(marks))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            marks = markers(item.path, set(getattr(item, "fixturenames", ())), imported(item.path))
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


def machine_lock_path(config: pytest.Config) -> Path:
    """The lock the tests of a run share: ``$TOKENWIRE_MACHINE_LOCK``, else one per run (xdist's workers share
    the controller's ``testrunuid``; a run without xdist has no one to share it with)."""
    if os.environ.get(MACHINE_LOCK_ENV):
        return Path(os.environ[MACHINE_LOCK_ENV])
    run = getattr(config, "workerinput", {}).get("testrunuid", f"pid{os.getpid()}")
    return Path(tempfile.gettempdir()) / f"tokenwire-tests-{run}.lock"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A load test runs (setup, call, teardown) holding the machine lock exclusively; any other test
    holds it shared, so the two never overlap, whichever worker or run each is in."""
    alone = (any(item.get_closest_marker(name) for name in ALONE_MARKERS)
             and item.get_closest_marker("alongside") is None)
    with open(machine_lock_path(item.config), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
