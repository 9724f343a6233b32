"""What a test needs from the machine, asked for in one place: a program, an npm package, a free port.

Whatever is missing skips the test with a reason that says how to install it, except that with
``TOKENWIRE_REQUIRE_ALL=1`` (as ``.ci/run`` sets, after installing everything) it fails the test instead,
so CI cannot go green by skipping.  ``skip_or_fail`` is that rule; ``require_binary``,
``require_node_package``, ``require_eventsource`` and ``require_ai_sdk`` apply it to what they look for.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Where `.ci/run` installs the npm packages the tests use (git-ignored).
NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
REQUIRE_ALL_ENV = "TOKENWIRE_REQUIRE_ALL"


def require_all() -> bool:
    """True when everything a test needs must be present (``TOKENWIRE_REQUIRE_ALL=1``)."""
    return os.environ.get(REQUIRE_ALL_ENV) == "1"


def skip_or_fail(reason: str, missing: str = "it") -> NoReturn:
    """Skip the test with ``reason``; under ``TOKENWIRE_REQUIRE_ALL=1`` fail it, saying the variable makes
    ``missing`` (what the reason is about) a failure."""
    if require_all():
        pytest.fail(f"{reason}; {REQUIRE_ALL_ENV}=1 makes {missing} a failure, not a skip", pytrace=False)
    pytest.skip(reason)


def require_binary(name: str) -> str:
    """Return the path of executable ``name``; skip the test if it is missing (fail under REQUIRE_ALL)."""
    path = shutil.which(name)
    if path is None:
        skip_or_fail(f"{name!r} is not installed (not on PATH); install it to run this test", "a missing program")
    return path


def require_node_package(name: str, reason: str = "", node: bool = True) -> Path:
    """The folder of npm package ``name`` under ``NODE_MODULES``; skips the test (fails under REQUIRE_ALL)
    without it, or with ``node`` without ``node`` on PATH to run it (a test that loads the package in a browser
    page runs no node).  ``reason``: what the skip says, if not the default."""
    if node:
        require_binary("node")
    path = NODE_MODULES / name
    if not (path / "package.json").exists():
        skip_or_fail(reason or f"the npm package {name} is not in {NODE_MODULES}: bash .ci/run installs it")
    return path


def require_eventsource() -> Path:
    """The npm ``eventsource`` client's folder (2.x; ``.ci/run`` installs it), with ``node`` to run it."""
    client = NODE_MODULES / "eventsource"
    return require_node_package(
        "eventsource", f"the npm eventsource client is not in {client}: npm install --prefix .ci/node eventsource@2")


def require_ai_sdk(node: bool = True) -> Path:
    """``NODE_MODULES`` once the AI SDK's chat transports (``ai@6``, ``@workflow/ai@6``) are in it (and, with
    ``node``, ``node`` is on PATH)."""
    reason = f"the npm packages ai@6 and @workflow/ai@6 are not in {NODE_MODULES}: bash .ci/run installs them"
    for name in ("ai", "@workflow/ai"):
        require_node_package(name, reason, node)
    return NODE_MODULES


def free_port() -> int:
    """A loopback TCP port the kernel says is free now (a server the test starts binds it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
