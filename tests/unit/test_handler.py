"""What Vercel runs, without a socket: the report function's pure core (``tokenwire.handler.respond``) routes, and a
bug in it is a plain 500, never a traceback; ``api/`` and ``vercel.json`` wire both functions (the live paths go to
the live function, with its longer ``maxDuration``), and ``requirements.txt`` is the package and the ``live`` extra.
(The handler over a real socket: ``servers/test_handler_over_socket.py``.)
"""

from __future__ import annotations

import json
import tomllib

import pytest
from support.requirements import ROOT

from tokenwire import handler as handler_module
from tokenwire.handler import handler, respond


def test_respond_is_pure_and_routes() -> None:
    status, headers, body = respond("GET", "/?scenario=block&format=json#frag")
    assert status == 200 and json.loads(body)["scenario"] == "block"
    assert ("Content-Type", "application/json; charset=utf-8") in headers
    assert respond("GET", "/api/report") == respond("GET", "/")
    assert respond("DELETE", "/")[0] == 405
    assert respond("GET", "/a?b")[0] == 404


def test_a_bug_is_a_plain_500_not_a_traceback(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    def broken(query: str) -> tuple[int, list[tuple[str, str]], bytes]:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(handler_module, "render", broken)
    status, headers, body = respond("GET", "/")
    assert status == 500 and b"secret" not in body and ("Cache-Control", "no-store") in headers
    assert "secret internals" in capsys.readouterr().err


def test_vercel_entry_and_config() -> None:
    namespace: dict[str, object] = {}
    exec(compile((ROOT / "api" / "report.py").read_text(), "api/report.py", "exec"), namespace)  # noqa: S102
    assert namespace["handler"] is handler
    config = json.loads((ROOT / "vercel.json").read_text())
    assert "builds" not in config and "routes" not in config
    function = config["functions"]["api/report.py"]
    assert 5 <= function["maxDuration"] <= 60 and "tests/**" in function["excludeFiles"]
    assert {"source": "/", "destination": "/api/report"} in config["rewrites"]


LIVE_PATHS = ["/live", "/static/:file", "/streams", "/streams/:id/events", "/stream"]


def test_vercel_json_routes_the_live_paths_to_the_live_function() -> None:
    config = json.loads((ROOT / "vercel.json").read_text())
    assert set(config["functions"]) == {"api/report.py", "api/live.py"}
    assert config["functions"]["api/live.py"]["maxDuration"] >= 60
    rewrites = {r["source"]: r["destination"] for r in config["rewrites"]}
    assert rewrites == {"/": "/api/report", **{path: "/api/live" for path in LIVE_PATHS}}


def test_requirements_txt_is_the_package_and_the_live_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["live"]]
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert [line for line in lines if line and not line.startswith("#")] == wanted
    assert {"uvicorn", "redis>=5.3", "hiredis>=3.0"} <= set(wanted)
