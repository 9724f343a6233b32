"""Nothing is built at import: ``import tokenwire.asgi`` succeeds with any ``$TOKENWIRE_LOG_URL``; the canned
app (``tokenwire.asgi:app``) is made on first use, and a bad URL is one line at the server's start-up."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from support.requirements import ROOT, free_port

from tokenwire.asgi import CannedApp

BAD_URL = "mysql://user:hunter2@db:3306/x"
LINE = ("tokenwire.asgi:app: TOKENWIRE_LOG_URL must be 'memory' or a redis://, rediss:// or unix:// URL, "
        "got 'mysql://user:***@db:3306/x'")


def _env(url: str) -> dict[str, str]:
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": pythonpath, "TOKENWIRE_LOG_URL": url}


def test_the_import_succeeds_with_a_bad_log_url() -> None:
    done = subprocess.run([sys.executable, "-c", "import tokenwire.asgi; from tokenwire.asgi import TokenStreams, app"],
                          cwd=ROOT, env=_env(BAD_URL), capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_the_import_opens_no_log() -> None:
    # A Redis URL: building the app would import the Redis log (and name a host nobody listens on).
    code = "import sys, tokenwire.asgi; print('tokenwire.redislog.blocking' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(f"redis://127.0.0.1:{free_port()}/0"),
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "False\n", "")


def test_uvicorn_with_a_bad_log_url_fails_at_start_up_with_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "uvicorn", "tokenwire.asgi:app", "--host", "127.0.0.1",
                           "--port", str(free_port()), "--log-level", "warning"],
                          cwd=ROOT, env=_env(BAD_URL), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3                              # uvicorn's status for a failed start-up
    assert done.stderr.splitlines() == [f"ERROR:    {LINE}", "ERROR:    Application startup failed. Exiting."]
    assert "hunter2" not in done.stderr + done.stdout


async def _run(app: CannedApp, scope: dict[str, Any], incoming: list[dict[str, Any]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def test_the_lifespan_start_up_fails_with_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENWIRE_LOG_URL", BAD_URL)
    sent = asyncio.run(_run(CannedApp(), {"type": "lifespan"}, [{"type": "lifespan.startup"}]))
    assert sent == [{"type": "lifespan.startup.failed", "message": LINE}]


def test_without_a_lifespan_each_request_gets_the_line_as_a_503(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENWIRE_LOG_URL", BAD_URL)
    scope = {"type": "http", "method": "GET", "path": "/stream", "query_string": b"", "headers": []}
    sent = asyncio.run(_run(CannedApp(), scope, [{"type": "http.request", "body": b""}]))
    assert sent[0]["status"] == 503
    assert json.loads(sent[1]["body"]) == {"error": LINE}


def test_the_app_is_built_once_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKENWIRE_LOG_URL", raising=False)
    app = CannedApp()
    assert app.streams() is app.streams()
