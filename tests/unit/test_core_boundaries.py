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
