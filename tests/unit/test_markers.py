"""The markers a test gets from where it sits and what it touches (``tests/conftest.py``), the folders they come from,
and their registration in ``pyproject.toml`` (under ``--strict-markers`` an unregistered one fails the run)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from conftest import FOLDER_MARKERS, TESTS, imported, markers
from support.requirements import ROOT

NOTHING: frozenset[str] = frozenset()


@pytest.mark.parametrize(("folder", "marks"), [("unit", ()), ("servers", ()), ("processes", ("slow",)),
                                              ("redis", ("redis", "slow")), ("load", ("load", "slow")),
                                              ("benchmarks", ("bench", "slow"))])
def test_a_test_gets_its_folders_markers(folder: str, marks: tuple[str, ...]) -> None:
    assert markers(TESTS / folder / "test_x.py", set(), NOTHING) == marks


def test_what_a_test_touches_adds_slow_and_redis_wherever_it_sits() -> None:
    assert markers(TESTS / "servers" / "test_x.py", set(), frozenset({"subprocess", "json"})) == ("slow",)
    assert markers(TESTS / "servers" / "test_x.py", set(), frozenset({"support.asgi"})) == ("slow",)
    assert markers(TESTS / "unit" / "test_x.py", {"redis_server", "tmp_path"}, NOTHING) == ("redis", "slow")
    assert markers(TESTS / "servers" / "test_x.py", set(), frozenset({"support.redis"})) == ("redis", "slow")
    assert markers(TESTS / "redis" / "test_x.py", {"own_redis"}, frozenset({"subprocess"})) == ("redis", "slow")
    assert markers(TESTS / "servers" / "test_x.py", set(), frozenset({"support.live", "socket"})) == ()
    assert markers(TESTS / "redis" / "test_x.py", set(), frozenset({"support.requirements",
                                                                    "support.requirements.require_eventsource"})
                   ) == ("redis", "slow", "node")
    assert markers(TESTS / "processes" / "test_x.py", set(), frozenset({"support.cdp"})) == ("slow", "browser")


@pytest.mark.parametrize("where", [TESTS / "test_x.py", TESTS / "misc" / "test_x.py"])
def test_a_file_outside_the_folders_is_refused_naming_them(where: Path) -> None:
    with pytest.raises(ValueError) as refused:
        markers(where, set(), NOTHING)
    assert str(refused.value) == (f"test file {where.relative_to(ROOT)} is outside the test folders: put it in "
                                  "tests/<folder>/, one of unit, servers, processes, redis, browser, node, load, "
                                  "benchmarks (tests/README.md)")


def test_imports_are_found_wherever_they_stand(tmp_path: Path) -> None:
    source = tmp_path / "test_x.py"
    source.write_text("import json\n\ndef test() -> None:\n    import subprocess\n    from support.redis import x\n")
    assert imported(source) == {"json", "subprocess", "support.redis", "support.redis.x"}


def test_every_folder_of_tests_has_its_markers_and_each_is_registered() -> None:
    folders = {path.name for path in TESTS.iterdir() if path.is_dir() and path.name not in {"support", "__pycache__"}}
    assert folders == set(FOLDER_MARKERS)
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {line.partition(":")[0] for line in options["markers"]}
    # Every folder's markers, and "alongside" (a load test that shares the machine lock: conftest).
    assert {mark for marks in FOLDER_MARKERS.values() for mark in marks} | {"redis", "slow", "alongside"} == registered
    assert "--strict-markers" in options["addopts"].split()
    listing = (TESTS / "README.md").read_text()
    assert [folder for folder in FOLDER_MARKERS if f"- `{folder}/`" not in listing] == []     # each one said
