"""The documentation holds together: every relative link in ``README.md`` and ``docs/*.md`` reaches a file, and
its ``#anchor`` a heading of that file (GitHub's anchor rules); benchmark figures stand in ``bench/RESULTS.md``
only; the sections the other tests read are each in one place."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from support.docs import README, ROOT, anchors, pages, prose_lines, section, slug

# [text](target) or [text](target "title"); an image's ![alt](src) is a link too.  [name]: target defines one.
_INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_DEFINED = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)       # http:, https:, mailto:, ...


def links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of each link in the page's prose: not in a fenced block or a code span."""
    found = []
    for index, line in prose_lines(page.read_text(encoding="utf-8")):
        line = _CODE_SPAN.sub("", line)
        found += [(index + 1, m.group(1)) for m in _INLINE.finditer(line)]
        defined = _DEFINED.match(line)
        if defined:
            found.append((index + 1, defined.group(1)))
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of ``page`` that does not resolve within ``root``, as ``page:line: target: why``."""
    broken = []
    for number, target in links(page):
        if _EXTERNAL.match(target):
            continue
        path, _, fragment = target.partition("#")
        whole = (page.parent / unquote(path)).resolve() if path else page.resolve()
        where = f"{page.name}:{number}: {target}"
        if not whole.is_relative_to(root.resolve()):
            broken.append(f"{where}: outside the repository")
        elif not whole.exists():
            broken.append(f"{where}: no such file")
        elif fragment and whole.suffix != ".md":
            broken.append(f"{where}: an anchor into a file that is not Markdown")
        elif fragment and unquote(fragment) not in anchors(whole):
            broken.append(f"{where}: no heading with that anchor")
    return broken


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert links(page) or page.name != "README.md"          # the README links to its pages
    assert broken_links(page) == []


def test_a_broken_link_is_found_and_named(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Its `part`: one\n")
    page = tmp_path / "page.md"
    page.write_text("# Here\n\n"
                    "[fine](other.md#its-part-one) [fine too](#here) [web](https://example.com/x#y)\n"
                    "[gone](missing.md) [no anchor](other.md#its-part) [self](#nowhere)\n"
                    "`[in code](missing.md)`\n\n"
                    "```md\n[in a block](missing.md)\n```\n\n"
                    "[ref]: other.md#other-pages\n[up]: ../elsewhere.md\n")
    assert broken_links(page, root=tmp_path) == [
        "page.md:4: missing.md: no such file",
        "page.md:4: other.md#its-part: no heading with that anchor",
        "page.md:4: #nowhere: no heading with that anchor",
        "page.md:11: other.md#other-pages: no heading with that anchor",
        "page.md:12: ../elsewhere.md: outside the repository",
    ]


@pytest.mark.parametrize(("title", "anchor"), [
    ("Your own model: `tokenwire.asgi`", "your-own-model-tokenwireasgi"),
    ("Live streams: `tokenwire serve`", "live-streams-tokenwire-serve"),
    ("Chat front ends: the AI SDK at `/chat`", "chat-front-ends-the-ai-sdk-at-chat"),
    ("Several readers, and shutdown", "several-readers-and-shutdown"),
    ("The `max_body_bytes` -- limit", "the-max_body_bytes----limit"),
    ("See [the frames](protocols.md#the-frames)", "see-the-frames"),
])
def test_anchors_follow_githubs_rules(title: str, anchor: str) -> None:
    assert slug(title) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Notes\n\n## Notes\n\n```sh\n# not a heading\n```\n\n## Notes\n")
    assert anchors(page) == {"notes", "notes-1", "notes-2"}


# A benchmark's figure: microseconds (not a range's bound, "100 us to 10 s": a histogram's buckets are settings),
# or a latency percentile as a ratio of its nominal.
FIGURE = re.compile(r"\d ?(?:us|µs)\b(?! to \d)|ITL p95 \d")


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_benchmark_figures_live_in_bench_results_only(page: Path) -> None:
    assert FIGURE.findall(page.read_text(encoding="utf-8")) == []
    assert FIGURE.search((ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8"))   # the pattern finds them


def test_the_readme_fits_on_a_screen_or_so() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md is {len(lines)} lines; what does not fit goes to docs/"


def test_a_section_is_found_in_one_place_and_ends_at_the_next_of_its_level() -> None:
    text = section("Reading a stream from Python")
    assert text.startswith("### Reading a stream from Python")
    assert "```python\n" in text and "\n## " not in text and "\n### " not in text
