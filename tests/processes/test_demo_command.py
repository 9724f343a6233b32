"""``tokenwire demo`` as the README runs it, in a fresh interpreter: it prints the socket report's five sections and
its progress on stderr, one line per run, within a timeout well under 30 s.  (The demo in this process:
``servers/test_demo.py``.)
"""

from __future__ import annotations

import os
import subprocess
import sys

from support.requirements import ROOT

from tokenwire.report.plan import demo_estimate_s

DEMO_TIMEOUT_S = 30


def test_the_readme_command_prints_progress_and_the_socket_report() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "tokenwire", "demo"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=DEMO_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    for heading in ("1. WHAT ACTUALLY GOES DOWN THE WIRE", "2. TIMING", "3. THE BUFFER UNDER A SLOW READER",
                    "4. DISCONNECT AND RESUME", "5. WHERE THE SLOWNESS WENT"):
        assert heading in done.stdout
    assert "measured over loopback sockets" in done.stdout
    assert "Everything above crossed a real socket" in done.stdout and "Nothing above opened" not in done.stdout
    assert f"about {demo_estimate_s():g} s; progress on stderr" in done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert [line.split()[1] for line in progress] == ["baseline", "block", "drop-newest", "cut", "resume"]
