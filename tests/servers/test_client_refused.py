"""``tokenwire read`` against a loopback port that refuses every connection: each retry is one line on stderr naming
the host and port and the wait, the give-up names the path, and a URL's ``user:password`` is never printed.
(Everything else of the client, over httpx's mock transport: ``unit/test_client.py``.)
"""

from __future__ import annotations

import re
import socket

import pytest


def test_read_says_each_retry_of_a_refused_connection_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenwire.client.command import cli_main
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))                  # bound and never listening: each connection is refused
        port = closed.getsockname()[1]
        status = cli_main([f"http://127.0.0.1:{port}/stream", "--max-attempts", "3"], sleep=lambda seconds: None)
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    refused = "ConnectError: [Errno 111] Connection refused"
    waits = [float(wait) for wait in re.findall(r" again in (\d+\.\d) s ", err)]
    assert re.sub(r" again in \d+\.\d s ", " again in N s ", err).splitlines() == [
        f"tokenwire read: {refused}; trying 127.0.0.1:{port} again in N s (attempt 2 of 3)",
        f"tokenwire read: {refused}; trying 127.0.0.1:{port} again in N s (attempt 3 of 3)",
        f"tokenwire read: gave up on /stream after 3 attempts in a row without a new event; the last: {refused}"]
    assert 2.0 <= waits[0] <= 3.0 and 4.0 <= waits[1] <= 6.0          # 1 s doubled per attempt, jitter up to half


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]"])
def test_read_never_prints_a_urls_password(host: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``user:pass@`` URL: each retry names the host and port only (IPv6 in brackets), the give-up the path."""
    from tokenwire.client.command import cli_main
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))                  # bound and never listening: each connection is refused
        port = closed.getsockname()[1]                 # ([::1]: refused, or no IPv6 at all: either fails)
        status = cli_main([f"http://alice:s3cret@{host}:{port}/streams/x/events", "--max-attempts", "2"],
                          sleep=lambda seconds: None)
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    lines = err.splitlines()
    assert len(lines) == 2 and "s3cret" not in err and "alice" not in err
    assert re.fullmatch(rf"tokenwire read: ConnectError: .*; trying {re.escape(host)}:{port} again in \d+\.\d s "
                        r"\(attempt 2 of 2\)", lines[0]), lines[0]
    assert lines[1].startswith("tokenwire read: gave up on /streams/x/events after 2 attempts in a row "
                               "without a new event; the last: ConnectError: ")
