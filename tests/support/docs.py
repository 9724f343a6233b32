"""The documentation's text, wherever a section lives: ``README.md`` and ``docs/*.md``.

Tests that run an example as written, or hold a table to the code, find it here by its heading or its marker,
so moving a section between pages moves no test.  A heading is matched by the start of its title (without the
``#``s), and must name exactly one section among the pages; a ``#`` line inside a fenced block is code, not a
heading.  ``anchors`` gives a page's link targets by GitHub's rules, for the test that every link resolves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

_HEADING = re.compile(r"(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"[ \t]{0,3}(```|~~~)")


def pages() -> list[Path]:
    """The README, then every page under ``docs/``."""
    return [README, *sorted(DOCS.glob("*.md"))]


@dataclass(frozen=True)
class Heading:
    page: Path
    line: int          # its index in the page's lines
    level: int
    title: str


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(index, line) of each line outside fenced code blocks (fences included as code)."""
    kept, fence = [], ""
    for index, line in enumerate(text.splitlines()):
        opened = _FENCE.match(line)
        if fence:
            if opened and line.strip().startswith(fence) and not line.strip()[3:].strip("`~"):
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        kept.append((index, line))
    return kept


def headings(page: Path) -> list[Heading]:
    found = []
    for index, line in prose_lines(page.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if match:
            found.append(Heading(page, index, len(match.group(1)), match.group(2)))
    return found


def _where(title: str) -> Heading:
    matches = [h for page in pages() for h in headings(page) if h.title.startswith(title)]
    places = [f"{h.page.relative_to(ROOT)}: {'#' * h.level} {h.title}" for h in matches]
    assert len(matches) == 1, f"a section titled {title!r} should be in exactly one page; found {places}"
    return matches[0]


def section(title: str) -> str:
    """The text of the one section whose title starts with ``title``, its heading line included, up to the
    next heading of the same or a higher level."""
    start = _where(title)
    lines = start.page.read_text(encoding="utf-8").splitlines()
    end = next((h.line for h in headings(start.page) if h.line > start.line and h.level <= start.level), len(lines))
    return "\n".join(lines[start.line:end]) + "\n"


def page_of(title: str) -> Path:
    """The page that holds the section whose title starts with ``title``."""
    return _where(title).page


def code_block(text: str, language: str) -> str:
    """The first fenced block of ``language`` in ``text``, without its fences."""
    match = re.search(rf"^```{re.escape(language)}\n(.*?)^```", text, re.S | re.M)
    assert match is not None, f"no ```{language} block in:\n{text[:200]}"
    return match.group(1)


def marked_block(marker: str, language: str) -> str:
    """The fenced block right after ``<!-- marker -->``, which must stand in exactly one page."""
    pattern = re.compile(rf"<!-- {re.escape(marker)} -->\n```{re.escape(language)}\n(.*?)^```", re.S | re.M)
    found = [m.group(1) for page in pages() for m in pattern.finditer(page.read_text(encoding="utf-8"))]
    assert len(found) == 1, f"the block marked <!-- {marker} --> should be in exactly one page; found {len(found)}"
    return found[0]


def all_text() -> str:
    """Every page's text, one after another."""
    return "\n".join(page.read_text(encoding="utf-8") for page in pages())


def slug(title: str) -> str:
    """A heading's anchor as GitHub makes it: the text lower-cased, what is not a letter, a digit, a space, a
    ``-`` or a ``_`` dropped, spaces turned into ``-`` (no collapsing)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)          # a link or an image: its text
    text = re.sub(r"<[^>]+>", "", text)                                 # inline HTML tags
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every ``#fragment`` a link into ``page`` may name: its headings' slugs (a repeated one gets ``-1``,
    ``-2``, ... as on GitHub) and any explicit ``<a id|name="...">``."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in headings(page):
        base = slug(heading.title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    text = page.read_text(encoding="utf-8")
    found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return found


def asgi_example() -> str:
    """The README's FastAPI example: the first python block of its section on your own model."""
    return code_block(section("Your own model: `tokenwire.asgi`"), "python")
