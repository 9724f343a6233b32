"""The DevTools driver (``support.cdp``) sees what the browser tests rely on: a page wider than its viewport and
a console error."""

from __future__ import annotations

from support.cdp import MEASURE, browser_page


def test_the_driver_sees_overflow_and_console_errors() -> None:
    page_html = ("<!doctype html><html lang=en><meta name=viewport content='width=device-width'><title>x</title>"
                 "<div style='width:900px'>wide</div><script>console.error('seen')</script>")
    with browser_page() as page:
        page.open("data:text/html," + page_html, 390)
        assert page.eval(MEASURE)["overflow"] > 400
        assert any("seen" in p for p in page.problems())
