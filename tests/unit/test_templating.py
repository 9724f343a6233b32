"""The report's jinja2 environment: the precompiled set is used while it is valid, else the sources, to the same output.

The compiled set (``tokenwire/templates/compiled``) is made by
``python -m tokenwire.report.templating``; its manifest holds each source's
SHA-256 and jinja2's major.minor, never the patch release, so any jinja2 the
package allows either loads it or compiles the sources instead.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import jinja2
import pytest

from tokenwire.report import templating
from tokenwire.report.model import Report, build_report
from tokenwire.report.params import DEFAULTS
from tokenwire.report.render import render_report

RENDERED = ("report.txt", "report.html", "prose.txt", "live.html")


@pytest.fixture(scope="module")
def reports() -> list[Report]:
    text = build_report(DEFAULTS)
    return [text, replace(text, params=replace(DEFAULTS, format="html"))]


def _copy(tmp_path: Path, jinja2_key: str | None = None) -> Path:
    """A copy of the compiled set; with ``jinja2_key``, its manifest says another jinja2 made it."""
    copy = Path(shutil.copytree(templating.COMPILED, tmp_path / "compiled"))
    if jinja2_key is not None:
        manifest = json.loads((copy / templating.MANIFEST).read_text())
        (copy / templating.MANIFEST).write_text(json.dumps({**manifest, "jinja2": jinja2_key}))
    return copy


def _pages(env: jinja2.Environment, reports: list[Report], monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    monkeypatch.setattr(templating, "ENV", env)          # render.py looks ENV up when it renders
    return [render_report(report) for report in reports]


def test_the_compiled_templates_are_those_of_the_sources() -> None:
    """Edit a template, then run ``python -m tokenwire.report.templating``: the cold start loads the compiled set."""
    manifest = json.loads((templating.COMPILED / templating.MANIFEST).read_text())
    assert {k: v for k, v in manifest.items() if k != "jinja2"} == templating.source_sums(), \
        "run: python -m tokenwire.report.templating"


def test_the_manifest_names_jinja2_by_major_minor_only() -> None:
    manifest = json.loads((templating.COMPILED / templating.MANIFEST).read_text())
    assert re.fullmatch(r"\d+\.\d+", manifest["jinja2"]), manifest["jinja2"]


def test_a_jinja2_patch_release_keeps_the_compiled_set(monkeypatch: pytest.MonkeyPatch) -> None:
    if not templating.compiled_is_valid():
        pytest.skip(f"the compiled set is for another jinja2 release than {jinja2.__version__}")
    monkeypatch.setattr(jinja2, "__version__", templating.jinja2_release() + ".999")
    assert templating.compiled_is_valid()


def test_the_precompiled_templates_are_used_when_valid(tmp_path: Path) -> None:
    if not templating.compiled_is_valid():
        pytest.skip(f"the compiled set is for another jinja2 release than {jinja2.__version__}")
    assert isinstance(templating.ENV.loader, jinja2.ChoiceLoader)
    assert str(templating.ENV.get_template("report.txt").filename).endswith(".py")   # the page renders from it
    env = templating.make_env(_copy(tmp_path))
    for name in RENDERED:
        assert str(env.get_template(name).filename).endswith(".py"), name   # a compiled module, not the source


def test_a_manifest_that_does_not_match_is_bypassed_with_the_same_output(
        tmp_path: Path, reports: list[Report], monkeypatch: pytest.MonkeyPatch) -> None:
    stale = _copy(tmp_path, jinja2_key="0.0")
    assert not templating.compiled_is_valid(stale)
    env = templating.make_env(stale)
    assert isinstance(env.loader, jinja2.PackageLoader)
    for name in RENDERED:
        assert Path(str(env.get_template(name).filename)).name == name    # compiled from the source
    from_source = _pages(env, reports, monkeypatch)
    assert from_source == _pages(templating.make_env(), reports, monkeypatch)


def test_another_jinja2_release_compiles_the_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jinja2, "__version__", "99.0.0")
    assert not templating.compiled_is_valid()
    assert isinstance(templating.make_env().loader, jinja2.PackageLoader)


def test_a_missing_or_broken_manifest_compiles_the_sources(tmp_path: Path) -> None:
    assert not templating.compiled_is_valid(tmp_path)
    (tmp_path / templating.MANIFEST).write_text("{not json")
    assert not templating.compiled_is_valid(tmp_path)
