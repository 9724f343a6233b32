"""The jinja2 environment the report's templates render in, and the filters that format figures for them.

How this works: one environment, built at import (``StrictUndefined``,
``trim_blocks``, ``lstrip_blocks``, ``keep_trailing_newline``; autoescape
for ``.html`` only).  The templates ship precompiled to Python as well
(``templates/compiled``, made by ``python -m tokenwire.report.templating``):
compiling the text report's template is most of a serverless cold start
(about 45 ms), loading its compiled module a sixth of that.  The compiled
set is used only while its manifest matches what it was made from: each
template source's SHA-256, and jinja2's major.minor release (the compiled
code's format and the runtime it calls follow the minor release; a patch
release loads it as is, and a test renders both ways and compares);
otherwise the sources are compiled as usual, to the same output.  Templates
do no arithmetic: numbers arrive computed and rounded, and these filters
only format and wrap them to the page's 78 columns.  The HTML page carries its stylesheet in one ``<style>`` element
whose SHA-256 is in the Content-Security-Policy (``csp()``), so no other
style, script or fetch can run on the page.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import jinja2
from markupsafe import Markup

__all__ = ["ENV", "WIDTH", "compile_templates", "compiled_is_valid", "css", "csp", "live_stylesheet", "make_env",
           "num"]

WIDTH = 78
# Paragraphs whose wrapping is kept: the page's fixed prose is a dozen, and a
# few hundred more keep the figure-bearing ones of recently asked pages.
WRAP_CACHE = 256


def _fill(text: str, width: int, head: str = "", indent: str = "") -> str:
    """Greedy word wrap (what ``textwrap.fill`` does here, at a fifth of the cost); long words stay whole."""
    lines, line, empty = [], head, True
    for word in text.split():
        if not empty and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = indent + word
        else:
            line = line + word if empty else line + " " + word
        empty = False
    lines.append(line)
    return "\n".join(lines)


@functools.lru_cache(maxsize=WRAP_CACHE)
def _wrap(text: str, width: int = WIDTH) -> str:
    """Wrap each non-empty line of ``text`` as a paragraph, a blank line between two; ends with a newline.

    Memoised: most of it is fixed prose.
    """
    return "\n\n".join(_fill(line, width) for line in text.split("\n") if line.strip()) + "\n"


def _hang(value: object, label: str, width: int = 19) -> str:
    """``label`` in a column of ``width``, then ``value`` wrapped under itself."""
    head = label.ljust(width - 1) + " " if label else " " * width
    return _fill(str(value), WIDTH, head, " " * width)


def _spread(left: str, right: str) -> str:
    return left + " " * max(1, WIDTH - len(left) - len(right)) + right if right else left


def _frame_lines(frame: str) -> list[str]:
    return [f"| {line}" if line else "|" for line in frame.split("\n")[:-1]]


def num(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".")


def plural(n: int, word: str) -> str:
    """``1 token``, ``0 tokens``, ``12 tokens``: a count and its noun, agreeing."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


_COUNTS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _count(n: int) -> str:
    """``five``, ``12``: a small count in words."""
    return _COUNTS[n] if 0 <= n < len(_COUNTS) else str(n)


def _times(n: int) -> str:
    """``once``, ``twice``, ``five times``, ``12 times``."""
    return {1: "once", 2: "twice"}.get(n, f"{_count(n)} times")


def _and_list(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items)


_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
COMPILED = _TEMPLATES / "compiled"
MANIFEST = "manifest.json"
_SOURCES = ("live.html", "prose.txt", "report.css", "report.html", "report.txt")


def jinja2_release() -> str:
    """jinja2's ``major.minor`` (``"3.1"``): what the compiled code's format follows."""
    return ".".join(jinja2.__version__.split(".")[:2])


def source_sums() -> dict[str, str]:
    """Each template source's SHA-256 (hex), by file name."""
    return {name: hashlib.sha256((_TEMPLATES / name).read_bytes()).hexdigest() for name in _SOURCES}


def _manifest() -> dict[str, str]:
    """What the compiled set must have been made from: each source's SHA-256, and jinja2's major.minor."""
    return {**source_sums(), "jinja2": jinja2_release()}


def compiled_is_valid(compiled: Path = COMPILED) -> bool:
    """True when the compiled set in ``compiled`` was made from these sources by this jinja2 release."""
    try:
        return bool(json.loads((compiled / MANIFEST).read_text()) == _manifest())
    except (OSError, ValueError):
        return False


def _loader(compiled: Path = COMPILED) -> jinja2.BaseLoader:
    source = jinja2.PackageLoader("tokenwire", "templates")
    if not compiled_is_valid(compiled):
        return source
    return jinja2.ChoiceLoader([jinja2.ModuleLoader(str(compiled)), source])


def compile_templates() -> None:
    """Write the compiled set and its manifest (run after editing a template)."""
    env = _make_env(jinja2.PackageLoader("tokenwire", "templates"))
    for old in COMPILED.glob("tmpl_*.py"):
        old.unlink()
    env.compile_templates(str(COMPILED), zip=None, ignore_errors=False,
                          filter_func=lambda name: name.endswith((".txt", ".html")))
    (COMPILED / MANIFEST).write_text(json.dumps(_manifest(), indent=1, sort_keys=True) + "\n")


def make_env(compiled: Path = COMPILED) -> jinja2.Environment:
    """The report's environment: over the compiled set in ``compiled`` while it is valid, else the sources."""
    return _make_env(_loader(compiled))


def _make_env(loader: jinja2.BaseLoader) -> jinja2.Environment:
    """The report's environment over ``loader``."""
    env = jinja2.Environment(
        loader=loader,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        auto_reload=False,   # templates ship with the package: no stat() per render
    )
    env.filters.update(
        wrap=_wrap, hang=_hang, spread=_spread, frame_lines=_frame_lines, num=num, times=_times, count=_count,
        plural=plural,
        and_list=_and_list,
        ms=lambda v: f"{v:.2f}", ms1=lambda v: f"{v:.1f}",
        ms_or=lambda v, other: other if v is None else f"{v:.2f}",
        idlist=lambda ids: "[" + ", ".join(map(str, ids)) + "]",
    )
    return env


ENV = make_env()
# Templates compile on first use (the environment caches them): a cold
# serverless start that answers in text does not pay for the HTML one.


@functools.lru_cache(maxsize=1)
def css() -> Markup:
    """The page's stylesheet, read once."""
    return Markup((_TEMPLATES / "report.css").read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def csp() -> str:
    """The page's Content-Security-Policy: only its own stylesheet (by hash), images from itself or data:."""
    digest = base64.b64encode(hashlib.sha256(css().encode()).digest()).decode()
    return (f"default-src 'none'; img-src 'self' data:; style-src 'sha256-{digest}'; "
            "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


def live_stylesheet() -> bytes:
    """What ``GET /static/live.css`` serves: the report's stylesheet, then the live page's own rules."""
    from importlib import resources
    own = resources.files("tokenwire.live").joinpath("static", "live.css").read_text()
    return (str(css()) + "\n" + own).encode()


if __name__ == "__main__":
    compile_templates()
    print(f"compiled the templates into {COMPILED}")
