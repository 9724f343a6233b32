"""``tokenwire report --format html > report.html``: a page opened from disk says where its controls work.

Served (the hosted page, or ``tokenwire serve``), the scenario links and the form ask the same server again
(``?scenario=...``, ``action=""``).  Saved by the command and opened from a file, those would only reload the
file: there they go to ``tokenwire serve`` at its default address, and the page says so.
"""

from __future__ import annotations

import io
import re

import pytest

from tokenwire.report.render import cli_main, render

SERVE = "http://127.0.0.1:8000/"


def _nav(page: str) -> str:
    return page.split('<nav aria-label="scenario and parameters">', 1)[1].split("</nav>", 1)[0]


def _hrefs(page: str) -> list[str]:
    return re.findall(r'<a href="([^"]*)"', _nav(page))


def test_a_saved_page_says_where_its_controls_work_and_points_them_there(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stdout:
        buffer = io.BytesIO()

        @staticmethod
        def flush() -> None:
            pass
    monkeypatch.setattr("sys.stdout", Stdout)
    assert cli_main(["--format", "html", "--scenario", "block"]) == 0
    page = Stdout.buffer.getvalue().decode()
    nav = _nav(page)
    assert "opened from a file" in nav and "tokenwire serve" in nav and SERVE in nav    # where they work
    hrefs = _hrefs(page)
    assert hrefs and all(href.startswith(SERVE + "?") for href in hrefs), hrefs
    assert any("scenario=drop-oldest" in href for href in hrefs)
    assert f'<form method="get" action="{SERVE}">' in nav


@pytest.mark.parametrize("served_live", [False, True], ids=["hosted", "tokenwire-serve"])
def test_a_served_page_keeps_its_controls_on_its_own_server_without_the_note(served_live: bool) -> None:
    status, _, body = render("format=html&scenario=block", served_live=served_live)
    page = body.decode()
    assert status == 200
    nav = _nav(page)
    assert SERVE not in page and "opened from a file" not in page
    hrefs = _hrefs(page)
    assert hrefs and all(href.startswith("?") for href in hrefs), hrefs
    assert '<form method="get" action="">' in nav
