"""The live page (``/live``) in Chromium: a pace a person can see, the outage shown while it lasts, words for every
state and error, no sideways scroll, a silent console (favicon included), axe-clean.

How: a ``LiveServer`` in this process (``serving``), Chromium over the
DevTools pipe (``support.cdp``) in real time: the page's default pace
(25 ms per token) makes 70 tokens and the 750 ms reconnect last about 2.5 s.
"""

from __future__ import annotations

from support.cdp import MEASURE, axe, browser_page, require_axe
from support.live import serving

FINISHED = "['done', 'failed'].includes(document.body.dataset.state)"
SERIOUS = ("serious", "critical")


def test_live_page_shows_the_outage_then_a_readable_result_at_both_widths() -> None:
    with serving() as server, browser_page() as page:
        for width in (390, 1280):
            page.open(f"{server.url}/live?cut_after=18", width)
            page.wait_until("document.body.dataset.state === 'reconnecting'", "the cut")
            status = page.eval("document.getElementById('status').textContent")
            assert status.startswith("Connection cut after id 17. The browser reconnects in ")
            assert page.eval("document.querySelectorAll('#shades rect').length") == 1
            page.wait_until(FINISHED, "the done frame", 60)
            assert page.eval("document.body.dataset.state") == "done"
            assert page.eval("document.getElementById('status').getAttribute('aria-live')") == "polite"
            assert page.eval("document.getElementById('status').textContent") == "Done: 70 tokens, 1 reconnect."
            assert page.eval("document.getElementById('reconnects').textContent") == "1"
            summary = page.eval("document.getElementById('summary').innerText")
            assert "0..69, in order, none repeated" in summary
            gaps = page.eval("JSON.parse(document.getElementById('result').textContent).gaps_ms")
            assert sorted(gaps)[len(gaps) // 2] > 15              # the 25 ms pace, not 0.5 ms
            assert page.eval("document.getElementById('pace-ms').textContent") == "25"
            seen = page.eval(MEASURE)
            assert seen["overflow"] <= 0 and seen["smallest"] >= 11, (width, seen)
            assert page.problems() == [], width
            region = "document.querySelector('.frames-box')"
            assert page.eval(f"{region}.tabIndex") == 0 and page.eval(f"{region}.getAttribute('aria-label')")
        assert "noscript" in page.eval("document.documentElement.outerHTML")
        assert page.eval("document.getElementById('report-link').getAttribute('href')") == (
            "/?cut_after=18&format=html")


def test_a_refused_parameter_is_said_in_words() -> None:
    with serving() as server, browser_page() as page:
        page.open(f"{server.url}/live?tokens=abc", 390)
        page.wait_until(FINISHED, "the refusal")
        error = page.eval("document.getElementById('error').textContent")
        assert error.startswith("The stream failed: the server refused to create the stream (400): ")
        assert "tokens must be a whole number from 1 to 277; got 'abc'" in error


def test_axe_finds_nothing_serious_on_live() -> None:
    source = require_axe()
    with serving() as server, browser_page() as page:
        page.open(f"{server.url}/live?cut_after=18", 1280, bypass_csp=True)
        page.wait_until(FINISHED, "the done frame", 60)
        found = [v for v in axe(page, source) if v["impact"] in SERIOUS]
        assert found == [], found
