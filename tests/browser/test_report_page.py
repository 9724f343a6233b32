"""The report page in Chromium: no sideways scroll, legible charts, no lost text, axe-clean; the form.

How: the report handler serves the page on loopback (``serving_report``),
``support.cdp`` drives Chromium over the DevTools pipe at 390 and 1280 CSS
px, and the page's own measurements (``MEASURE``) are read back.  The form
test needs no browser: it builds the query the form sends for each number of
tokens it offers, the cut left blank, and asks ``render``.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from support.cdp import MEASURE, axe, browser_page, require_axe
from support.live import serving_report

from tokenwire.core.model import ANSWER
from tokenwire.report.model import build_report
from tokenwire.report.params import SCENARIOS, parse_query
from tokenwire.report.render import render

WIDTHS = (390, 1280)
MIN_CHART_PX = 11
SERIOUS = ("serious", "critical")


@pytest.mark.parametrize("tokens", [70, len(ANSWER)])
def test_every_scenario_fits_both_widths_with_legible_charts_and_a_silent_console(tokens: int) -> None:
    with serving_report() as (host, port), browser_page() as page:
        for scenario in SCENARIOS:
            for width in WIDTHS:
                page.open(f"http://{host}:{port}/?format=html&scenario={scenario}&tokens={tokens}", width)
                seen = page.eval(MEASURE)
                where = f"{scenario}, {tokens} tokens, {width} px"
                assert seen["overflow"] <= 0, f"{where}: the page scrolls sideways by {seen['overflow']} px"
                assert seen["texts"] > 50 and seen["smallest"] >= MIN_CHART_PX, (where, seen)
                assert page.problems() == [], where


def test_axe_finds_nothing_serious_on_any_scenario() -> None:
    source = require_axe()
    with serving_report() as (host, port), browser_page() as page:
        for scenario in SCENARIOS:
            page.open(f"http://{host}:{port}/?format=html&scenario={scenario}", 1280, bypass_csp=True)
            found = [v for v in axe(page, source) if v["impact"] in SERIOUS]
            assert found == [], (scenario, found)


def test_lost_text_is_not_in_the_dom_and_each_hole_says_how_many_tokens() -> None:
    params = parse_query("scenario=drop-oldest")
    row = build_report(params).row("drop-oldest")
    with serving_report() as (host, port), browser_page() as page:
        page.open(f"http://{host}:{port}/?format=html&scenario=drop-oldest", 1280)
        answers = page.eval("[...document.querySelectorAll('.answer')].map(a => a.textContent)")
        names = page.eval("[...document.querySelectorAll('.answer')[1].querySelectorAll('.hole')]"
                          ".map(h => h.getAttribute('aria-label'))")
    received = "".join(text if not lost else f"{lost} lost" for text, lost in row.pieces)
    assert answers[1] == received                         # drop-newest first, then drop-oldest
    assert names == [f"{lost} token{'s' if lost > 1 else ''} lost" for _, lost in row.pieces if lost]


def _form_query(tokens: int) -> str:
    """What the page's form sends for ``tokens`` with every other field as the page shows it, the cut blank."""
    return urlencode({"scenario": "disconnect", "clock": "virtual", "tokens": tokens, "buffer": 4, "reader_ms": 3,
                      "producer_ms": 0.5, "cut_after": "", "seed": 1, "format": "html"})


def test_the_forms_own_combinations_never_give_a_400() -> None:
    page = render("format=html")[2].decode()
    assert 'name="cut_after" type="number" min="0" max="276" placeholder="default"' in page
    assert 'value="18"' not in page.split('name="cut_after"')[1].split(">")[0]     # the default is left blank
    for tokens in range(1, len(ANSWER) + 1):
        status, _, body = render(_form_query(tokens))
        assert status == 200, (tokens, body[:200])


def test_served_live_the_report_links_to_live_with_the_same_parameters() -> None:
    page = render("format=html&tokens=40&buffer=8", served_live=True)[2].decode()
    assert 'href="/live?tokens=40&amp;buffer=8&amp;cut_after=18"' in page
    assert "this server can also hold a stream open" in page
    assert "/live" not in render("format=html&tokens=40&buffer=8")[2].decode()
