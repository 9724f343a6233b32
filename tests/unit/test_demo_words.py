"""What ``tokenwire demo`` says of the server it measured: true of ``tokenwire serve`` (one thread, one event loop)."""

import re

import pytest

from tokenwire.report.templating import ENV
from tokenwire.report.voice import COMMAND, PAGE, Voice


@pytest.mark.parametrize("voice", [COMMAND, PAGE], ids=["command", "page"])
def test_the_socket_report_closing_claims_no_threads_per_connection(voice: Voice) -> None:
    closing = str(ENV.get_template("prose.txt").module.closing("real", "sockets", voice))   # type: ignore[attr-defined]
    assert "Everything above crossed a real socket" in closing
    assert "one asyncio event loop" in closing and "one thread" in closing
    # Every thread it names is the one thread; no request thread, no producer thread.
    assert re.findall(r"\w+ threads?\b", closing) == ["one thread"], closing
