"""The command line as a user types it, in a fresh interpreter (``python -m tokenwire ...``): a usage error is one
line on stderr naming the flag and exit 2, with nothing on stdout; a port in use or a host that does not resolve
is one line naming it and exit 1.  The same refusals through ``tokenwire.cli.main`` in this process:
``unit/test_cli_usage.py``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from support.requirements import ROOT


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


LISTENERS = pytest.mark.parametrize("argv", [["serve"], ["proxy", "--upstream", "http://127.0.0.1:9/v1"]],
                                    ids=["serve", "proxy"])


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``python -m tokenwire *argv`` from this checkout, to its end."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "tokenwire", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=False)


@LISTENERS
def test_a_port_in_use_is_one_line_naming_it_and_exit_1(argv: list[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = _run([*argv, "--port", str(port)])
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", f"tokenwire {argv[0]}: cannot listen on 127.0.0.1:{port}: Address already in use\n")


@LISTENERS
def test_a_host_that_does_not_resolve_is_one_line_naming_it_once_and_exit_1(argv: list[str]) -> None:
    """It said the address twice: ``... nonexist.invalid:8123: Name or service not known (while attempting to bind
    on address ('nonexist.invalid', 8123))``.  The resolver's word is this machine's (glibc's, musl's, offline)."""
    with pytest.raises(socket.gaierror) as resolved:
        socket.getaddrinfo("nonexist.invalid", 8123)
    done = _run([*argv, "--host", "nonexist.invalid", "--port", "8123"])
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", f"tokenwire {argv[0]}: cannot listen on nonexist.invalid:8123: {resolved.value.strerror}\n")


def test_a_bad_flag_in_a_real_process_is_exit_2_without_a_traceback() -> None:
    done = subprocess.run([sys.executable, "-m", "tokenwire", "report", "--producer-ms", "NaN"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("tokenwire report: --producer-ms must be") and "'NaN'" in done.stderr
    assert "Traceback" not in done.stderr
