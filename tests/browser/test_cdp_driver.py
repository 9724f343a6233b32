"""The DevTools driver (``support.cdp``) sees what the browser tests rely on, a page wider than its viewport and a
console error, and a command whose answer never comes times out though events keep coming (a page reconnecting
for ever sends them)."""

from __future__ import annotations

import os
import threading

from support.cdp import MEASURE, Browser, browser_page


def test_the_driver_sees_overflow_and_console_errors() -> None:
    page_html = ("<!doctype html><html lang=en><meta name=viewport content='width=device-width'><title>x</title>"
                 "<div style='width:900px'>wide</div><script>console.error('seen')</script>")
    with browser_page() as page:
        page.open("data:text/html," + page_html, 390)
        assert page.eval(MEASURE)["overflow"] > 400
        assert any("seen" in p for p in page.problems())


def test_a_command_whose_answer_never_comes_times_out_though_events_keep_coming() -> None:
    browser = Browser.__new__(Browser)              # the protocol's two pipes, without a Chromium behind them
    read_end, write_end = os.pipe()
    browser._from_chrome, browser._to_chrome = read_end, os.open(os.devnull, os.O_WRONLY)
    browser._buffer, browser._next, browser.events = b"", 0, []
    stop = threading.Event()

    def chatter() -> None:                          # an event every 10 ms, never the command's answer
        while not stop.wait(0.01):
            os.write(write_end, b'{"method": "Network.dataReceived"}\0')
    threading.Thread(target=chatter, daemon=True).start()
    outcome: list[BaseException] = []

    def ask() -> None:
        try:
            browser.send("Runtime.evaluate", timeout_s=0.3)
        except BaseException as error:
            outcome.append(error)
    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    asking.join(10)                                 # far past the command's 0.3 s: it did not return at all
    stop.set()
    assert not asking.is_alive() and len(outcome) == 1
    assert type(outcome[0]) is TimeoutError
    assert str(outcome[0]) == "Runtime.evaluate: no answer from Chromium within 0.3 s"
    assert len(browser.events) > 3                  # the events that came meanwhile are kept
    for fd in (read_end, write_end, browser._to_chrome):
        os.close(fd)
