"""The package's layout: no import circle anywhere (type-only and function-level imports included), small modules."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tokenwire"
# The decoder's hot path is one module on purpose (its column and regex paths share tables).
LONG_ALLOWED = {"core/sse.py"}
MAX_LINES = 400


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """Every tokenwire module ``path`` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)   # "from . import registry"
    return {m for m in found if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _without_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's ``__init__`` re-exports its modules; its modules importing siblings through it is no circle."""
    return {name: {m for m in deps if not name.startswith(m + ".")} for name, deps in graph.items()}


def test_no_import_cycle() -> None:
    assert _cycles(_without_packages(_graph())) == []


def test_the_cycle_finder_finds_one() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_three_rooms_exist() -> None:
    for room in ("core", "report", "live", "templates"):
        assert (PACKAGE / room).is_dir(), room
    assert (PACKAGE / "handler.py").is_file() and (PACKAGE / "cli.py").is_file()


def test_the_core_imports_nothing_outside_it() -> None:
    graph = _graph()
    outside = {name: sorted(m for m in deps if not m.startswith("tokenwire.core"))
               for name, deps in graph.items() if name.startswith("tokenwire.core")}
    assert {name: deps for name, deps in outside.items() if deps} == {}


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_size(path: pathlib.Path) -> None:
    if str(path.relative_to(PACKAGE)) in LONG_ALLOWED:
        return
    assert len(path.read_text().splitlines()) <= MAX_LINES
