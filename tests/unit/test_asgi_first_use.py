"""The canned ASGI app (``tokenwire.asgi:app``) is made on first use, in this process: with a bad
``$TOKENWIRE_LOG_URL`` the lifespan's start-up fails with one line naming the setting, and without a lifespan each
request gets that line as a 503.  (The import itself, in a fresh interpreter: ``processes/test_imports.py``.)
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tokenwire.asgi import CannedApp

BAD_URL = "mysql://user:hunter2@db:3306/x"
LINE = ("tokenwire.asgi:app: TOKENWIRE_LOG_URL must be 'memory' or a redis://, rediss://, unix://, "
        "redis+sentinel:// or rediss+sentinel:// URL, got 'mysql://user:***@db:3306/x'")


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
