"""The core must stay sans-IO: no module under tokenwire/core imports I/O machinery."""

import ast
import pathlib

import pytest
from support.requirements import ROOT

CORE = ROOT / "tokenwire" / "core"
FORBIDDEN = {"socket", "http", "urllib", "asyncio", "selectors", "ssl", "socketserver", "redis"}


def _imported_roots(path: pathlib.Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


CORE_MODULES = sorted(CORE.glob("*.py"))


def test_core_has_modules():
    assert len(CORE_MODULES) >= 10


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda p: p.name)
def test_core_module_imports_no_io(path):
    assert not (_imported_roots(path) & FORBIDDEN), f"{path.name} imports {_imported_roots(path) & FORBIDDEN}"


def test_checker_catches_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import http.client\nfrom socket import socket\n")
    assert _imported_roots(bad) & FORBIDDEN == {"http", "socket"}


# The redis extra is optional: with neither redis nor hiredis importable, the memory log's servers, the ASGI app
# and the report still load (a Redis-only module imported at the top of a shared one would break them all).
WITHOUT_REDIS = """
import sys
sys.modules["redis"] = sys.modules["hiredis"] = None          # an import of either fails, as when not installed
import tokenwire.asgi, tokenwire.cli, tokenwire.endpoints.logs, tokenwire.live.server, tokenwire.redislog.streams
from tokenwire.redislog.streams import open_log
try:
    open_log("redis://127.0.0.1:1/0", lambda: 0)
except ValueError as exc:
    print("refused:", exc)
sys.exit(tokenwire.cli.main(["report", "--tokens", "12"]))
"""


def test_the_package_runs_without_the_redis_extra():
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", WITHOUT_REDIS], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused: a redis:// log needs the redis package: pip install 'tokenwire[redis]'" in done.stdout
    assert "Traceback" not in done.stderr
