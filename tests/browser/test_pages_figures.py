"""Pages that lead with the figure, in Chromium.

The report's first screen holds the scenario's verdict and chart, the prose after them; no chart label lies on
the plot (so on no line), on another label, or past its chart's edge; at 390 px every table fits, stacks, or
scrolls with a shadow on the side that hides columns, and the policy table shows every column; each column's
header is aligned as its cells are.  The live page says a failure's reason once (a 503's words included), and
how much of the answer it shows.

How: the report handler (``serving_report``) and a ``LiveServer`` (``serving``) on loopback, Chromium over the
DevTools pipe (``support.cdp``); every figure is the page's own geometry (``getBoundingClientRect``, the plot's
``getScreenCTM``), read back as JSON.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.cdp import axe, browser_page, require_axe
from support.live import serving, serving_report
from support.requirements import free_port

from tokenwire.core.model import ANSWER
from tokenwire.endpoints.logs import make_registry
from tokenwire.report.params import SCENARIOS

SCREENS = ((390, 844), (1280, 900))        # a phone's first screen and a laptop's
FINISHED = "['done', 'failed'].includes(document.body.dataset.state)"

FIRST_SCREEN = """(() => {
  const verdict = document.querySelector('#result .verdict').getBoundingClientRect();
  const chart = document.querySelector('#result figure.chart > svg').getBoundingClientRect();
  const prose = document.querySelector('.lede').getBoundingClientRect();
  return {verdict: verdict.bottom, chart: chart.bottom, prose: prose.top, screen: innerHeight,
          first: document.querySelector('main > section, main > .intro').id};
})()"""

# Every chart text's box against the plot (where every line is drawn), the other texts, and the chart's edges.
LABELS = """(() => {
  const found = [];
  const meet = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5
    && b.top < a.bottom - 0.5;
  for (const figure of document.querySelectorAll('figure.chart')) {
    const outer = figure.querySelector(':scope > svg');
    const plot = outer.querySelector('svg');
    const box = outer.getBoundingClientRect(), area = plot.getBoundingClientRect();
    const edge = figure.getBoundingClientRect();
    const name = outer.querySelector('title').textContent;
    const texts = [...outer.querySelectorAll(':scope > text')].filter((t) => t.textContent.trim())
      .map((t) => ({text: t.textContent, tick: t.classList.contains('y-tick'), r: t.getBoundingClientRect()}));
    const ctm = plot.getScreenCTM();
    const points = [...plot.querySelectorAll('polyline, polygon')].flatMap((line) => [...line.points])
      .map((p) => new DOMPoint(p.x, p.y).matrixTransform(ctm));
    texts.forEach((t, i) => {
      if (meet(t.r, area)) found.push(`${name}: '${t.text}' lies on the plot`);
      if (points.some((p) => p.x > t.r.left && p.x < t.r.right && p.y > t.r.top && p.y < t.r.bottom)) {
        found.push(`${name}: '${t.text}' covers a point of a line`);
      }
      const [left, right] = t.tick ? [edge.left, box.left] : [box.left, box.right];
      if (t.r.left < left - 0.5 || t.r.right > right + 0.5) found.push(`${name}: '${t.text}' is clipped`);
      texts.slice(i + 1).filter((u) => meet(t.r, u.r))
        .forEach((u) => found.push(`${name}: '${t.text}' on '${u.text}'`));
    });
  }
  return found;
})()"""

# Each table at this width: fits its box, stacks (its cells are blocks), or scrolls with a visible shadow.
TABLES = """(() => {
  document.querySelectorAll('details').forEach((d) => { d.open = true; });
  return [...document.querySelectorAll('table')].map((table) => {
    const box = table.closest('.scroll') || table.parentElement;
    const style = getComputedStyle(box), cells = [...table.querySelectorAll('td')];
    const right = box.getBoundingClientRect().right;
    return {name: table.querySelector('caption')?.textContent || box.getAttribute('aria-label'),
            fits: table.scrollWidth <= box.clientWidth,
            stacked: cells.length > 0 && cells.every((td) => getComputedStyle(td).display !== 'table-cell'),
            scrolls: ['auto', 'scroll'].includes(style.overflowX) && box.scrollWidth > box.clientWidth,
            shadow: style.backgroundImage.includes('gradient'),
            hidden: cells.filter((td) => td.getBoundingClientRect().right > right + 0.5).length};
  });
})()"""

# Each header's alignment against its column's cells (rows whose cells line up with the head).
ALIGNED = """(() => {
  const found = [];
  for (const table of document.querySelectorAll('table')) {
    const heads = [...table.querySelectorAll('thead th')].map((th) => getComputedStyle(th).textAlign);
    for (const row of table.querySelectorAll('tbody tr')) {
      const cells = [...row.children];
      if (cells.length !== heads.length || !cells[1] || !cells[1].textContent.trim()) continue;
      cells.forEach((cell, i) => {
        const align = getComputedStyle(cell).textAlign;
        if (align !== heads[i]) found.push(`${table.querySelector('thead th').textContent} table, column ${i + 1}: `
          + `header ${heads[i]}, '${cell.textContent}' ${align}`);
      });
    }
  }
  return [...new Set(found)];
})()"""


def _report(host: str, port: int, scenario: str, tokens: int = 70) -> str:
    return f"http://{host}:{port}/?format=html&scenario={scenario}&tokens={tokens}"


def test_the_first_screen_shows_the_scenarios_verdict_and_chart_with_the_prose_after() -> None:
    with serving_report() as (host, port), browser_page() as page:
        for scenario in SCENARIOS:
            for width, height in SCREENS:
                page.open(_report(host, port, scenario), width, height)
                seen = page.eval(FIRST_SCREEN)
                where = f"{scenario} at {width}x{height}"
                assert seen["first"] == "result", where
                assert seen["verdict"] <= seen["chart"] <= seen["screen"], (where, seen)
                assert seen["prose"] >= seen["chart"], (where, seen)
                verdict = page.eval("document.querySelector('#result .verdict').textContent")
                assert verdict.startswith(f"{scenario}: "), (where, verdict)


@pytest.mark.parametrize("tokens", [70, len(ANSWER)])
def test_no_chart_label_lies_on_a_line_a_tick_or_another_label_or_is_clipped(tokens: int) -> None:
    with serving_report() as (host, port), browser_page() as page:
        for scenario in SCENARIOS:
            for width, height in SCREENS:
                page.open(_report(host, port, scenario, tokens), width, height)
                assert page.eval(LABELS) == [], f"{scenario}, {tokens} tokens, {width} px"


def test_at_390_px_every_table_fits_stacks_or_visibly_scrolls_and_the_policy_table_shows_every_column() -> None:
    with serving_report() as (host, port), browser_page() as page:
        for scenario in SCENARIOS:
            page.open(_report(host, port, scenario), 390, 844)
            tables = page.eval(TABLES)
            assert len(tables) >= 10, scenario
            for table in tables:
                where = (scenario, table)
                assert table["fits"] or table["stacked"] or (table["scrolls"] and table["shadow"]), where
            policies = next(t for t in tables if t["name"] == "the buffer under each policy")
            assert policies["stacked"] and policies["hidden"] == 0, (scenario, policies)
            wall = page.eval("[...document.querySelectorAll('#buffer td[data-label=\"wall ms\"]')]"
                             ".map((td) => [getComputedStyle(td, '::before').content, td.textContent])")
            assert len(wall) == 4 and all(label == '"wall ms"' and value for label, value in wall), wall


def test_every_header_is_aligned_as_its_column() -> None:
    with serving_report() as (host, port), browser_page() as page:
        for scenario in SCENARIOS:
            page.open(_report(host, port, scenario), 1280)
            page.eval("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
            assert page.eval(ALIGNED) == [], scenario


def _visible_text(page: Any) -> str:
    return str(page.eval("document.querySelector('main').innerText"))


def test_the_live_page_names_a_refusals_reason_once_when_the_log_is_unavailable() -> None:
    registry = make_registry(f"redis://127.0.0.1:{free_port()}/0")
    with serving(registry=registry) as server, browser_page() as page:
        for width in (390, 1280):
            page.open(f"{server.url}/live", width)
            page.wait_until(FINISHED, "the page to give up", 60)
            text = _visible_text(page)
            said = ("The stream failed: POST /streams was refused 6 times in a row (503: the token log is "
                    "unavailable); the page gave up")
            assert page.eval("document.getElementById('error').textContent") == said
            assert text.count("was refused 6 times") == 1 and text.count("the page gave up") == 1, text
            assert page.eval("document.getElementById('status').hidden") is True
            notes = page.eval("[...document.querySelectorAll('#connections li')].map((li) => li.textContent)")
            assert notes[0] == ("POST /streams refused (503: the token log is unavailable); trying again in 1 s "
                                "(try 1 of 5)"), notes


def test_the_live_page_names_a_models_failure_once() -> None:
    with serving() as server, browser_page() as page:
        page.open(f"{server.url}/live?tokens=abc", 390)
        page.wait_until(FINISHED, "the refusal")
        assert _visible_text(page).count("tokens must be a whole number from 1 to 277; got 'abc'") == 1


def test_the_live_page_says_how_much_of_the_answer_it_shows() -> None:
    whole = len(ANSWER)
    with serving() as server, browser_page() as page:
        page.open(f"{server.url}/live?producer_ms=1", 390)
        page.wait_until(FINISHED, "the done frame", 60)
        assert page.eval("document.getElementById('shown').textContent") == (
            f"The first 70 of the answer's {whole} tokens (tokens=70 in the address); watch all {whole}.")
        assert page.eval("document.querySelector('#shown a').getAttribute('href')") == (
            f"/live?producer_ms=1&tokens={whole}")
        page.open(f"{server.url}/live?producer_ms=1&tokens={whole}", 1280)
        page.wait_until(FINISHED, "the done frame", 60)
        assert page.eval("document.getElementById('shown').textContent") == f"The whole answer: {whole} tokens."
        assert page.eval("document.getElementById('count').textContent") == str(whole)
        assert page.eval(LABELS) == []                     # the arrivals chart: no label on the line


def test_the_live_chart_keeps_its_labels_off_the_line_and_the_outage_at_both_widths() -> None:
    with serving() as server, browser_page() as page:
        for width, height in SCREENS:
            page.open(f"{server.url}/live?cut_after=18&producer_ms=5", width, height)
            page.wait_until(FINISHED, "the done frame", 60)
            assert page.eval("document.querySelectorAll('#shades rect').length") == 1
            assert page.eval(LABELS) == [], width


def test_axe_finds_nothing_serious_at_390_px_with_the_tables_stacked() -> None:
    source = require_axe()
    with serving_report() as (host, port), browser_page() as page:
        for scenario in SCENARIOS:
            page.open(_report(host, port, scenario), 390, 844, bypass_csp=True)
            found = [v for v in axe(page, source) if v["impact"] in ("serious", "critical")]
            assert found == [], (scenario, found)
