"""One style of usage error for ``report``, ``serve`` and ``demo``: one line on stderr naming the flag, exit 2.

No usage block, no traceback, nothing on stdout; the line names the flag (and the value when it is the value
that is wrong) and what is expected.  Checked through ``tokenwire.cli.main`` and, once per command, in a fresh
interpreter as a user types it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokenwire.cli import main

ROOT = Path(__file__).resolve().parent.parent

CASES = [
    # (argv, the one line on stderr)
    (["report", "--bogus", "1"], "tokenwire report: unknown flag '--bogus'; allowed: --scenario, --format, --clock, "
                                 "--tokens, --buffer, --reader-ms, --producer-ms, --cut-after, --seed"),
    (["report", "--tokens", "abc"], "tokenwire report: --tokens must be a whole number from 1 to 277; got 'abc'"),
    (["serve", "--bogus", "1"], "tokenwire serve: unknown flag '--bogus'; allowed: --host, --port, --heartbeat-s, "
                                "--write-timeout-s, --request-timeout-s, --max-live, --max-connections, "
                                "--max-streams, --max-age-s, --create-burst, --create-rate, --grace-s, "
                                "--max-duration-s, --max-body-bytes, --max-chat-body-bytes, --quiet, --log"),
    (["serve", "--max-body-bytes", "-1"], "tokenwire serve: --max-body-bytes must be a non-negative int, got -1"),
    (["serve", "--bogus=1"], None),
    (["serve", "--port", "abc"], "tokenwire serve: --port must be a whole number; got 'abc'"),
    (["serve", "--grace-s", "soon"], "tokenwire serve: --grace-s must be a number; got 'soon'"),
    (["serve", "--port"], "tokenwire serve: flag --port needs a value"),
    (["serve", "extra"], "tokenwire serve: unexpected argument 'extra'; flags look like --name value (see --help)"),
    (["serve", "--port", "70000"], "tokenwire serve: --port must be from 0 to 65535, got 70000"),
    (["demo", "--bogus"], "tokenwire demo: unknown flag '--bogus'; allowed: --format, --reader-ms, --buffer, "
                          "--cut-after, --sndbuf, --rcvbuf, --quiet"),
    (["demo", "--format", "xml"], "tokenwire demo: --format must be one of text, json; got 'xml'"),
    (["demo", "--buffer", "many"], "tokenwire demo: --buffer must be a whole number; got 'many'"),
    (["demo", "--buffer", "65"], "tokenwire demo: --buffer must be from 1 to 64, got 65"),
]


@pytest.mark.parametrize(("argv", "line"), CASES, ids=[" ".join(argv) for argv, _ in CASES])
def test_a_bad_flag_or_value_is_one_line_and_exit_2(argv: list[str], line: str | None,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1 and err.endswith("\n"), err
    assert err.startswith(f"tokenwire {argv[0]}: ") and "usage:" not in err and "error:" not in err
    assert argv[1].partition("=")[0] in err                # the flag (or the stray argument) is named
    if line is not None:
        assert err == line + "\n"


@pytest.mark.parametrize("command", ["report", "serve", "demo"])
@pytest.mark.parametrize("argv", [["--bogus"], ["--buffer", "x"]], ids=["unknown-flag", "bad-value"])
def test_the_command_as_typed_prints_one_line(command: str, argv: list[str]) -> None:
    if command == "serve" and argv[0] == "--buffer":
        argv = ["--max-live", "x"]                          # serve has no --buffer
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "tokenwire", command, *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"tokenwire {command}: ") and argv[0] in done.stderr
    assert "Traceback" not in done.stderr and "usage:" not in done.stderr
