"""Shutdown without tracebacks: Ctrl-C to ``tokenwire serve`` after a page, SIGTERM to the demo.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group: the server, its fork server and its page
workers.  The workers and the fork server ignore it and the server decides, so the server exits 0 and nobody
prints ``Process ForkServerProcess-1: Traceback ... KeyboardInterrupt``, ``--quiet`` or not, on both event loops.
``tokenwire demo`` stopped by SIGTERM (or Ctrl-C) shuts its server down and exits 128 + the signal, and the
resource tracker finds no leaked semaphore.  Each process runs in a session of its own (``start_new_session``);
every wait is on a condition (the banner, a served page, a progress line, the pipes' end), none on a sleep.
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys

import pytest
from support.live import wait_until
from support.requirements import ROOT

TIMEOUT_S = 60.0


def _popen(*args: str, loop: str = "asyncio") -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENWIRE_LOOP": loop}
    env.pop("TOKENWIRE_LOG_URL", None)
    return subprocess.Popen([sys.executable, "-m", "tokenwire", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _finish(proc: subprocess.Popen[str], first: str) -> tuple[int, str]:
    """Wait for the process and for every holder of its pipes (workers, resource tracker) to let go of them."""
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return proc.returncode, first + out + err


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if int(stat.read().rpartition(")")[2].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError):
            continue                          # not a process, or gone meanwhile
    return found


def _wchan(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/wchan") as wchan:
            return wchan.read()
    except OSError:
        return ""


def _wait_workers_idle(server: int) -> None:
    """Wait until the page workers (the fork server's children) wait on their call queue, a pipe.

    Earlier, a worker still returning its result catches the KeyboardInterrupt
    with the result's own ``except BaseException`` and the test could not see it.
    """
    def idle() -> bool:
        workers = [worker for child in _children(server) for worker in _children(child)]
        return bool(workers) and all("pipe_read" in _wchan(worker) for worker in workers)
    wait_until(idle, "the page workers to wait on their queue", TIMEOUT_S)


def _page(port: int) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        conn.request("GET", "/?format=text&tokens=20")
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the workers' state in /proc")
@pytest.mark.parametrize("quiet", [False, True], ids=["", "quiet"])
def test_ctrl_c_after_a_page_exits_0_without_a_traceback(loop_kind: str, quiet: bool) -> None:
    proc = _popen("serve", "--port", "0", *(["--quiet"] if quiet else []), loop=loop_kind)
    assert proc.stdout is not None
    banner = proc.stdout.readline()                          # the banner's first line: it listens
    if "serving on http://127.0.0.1:" not in banner:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(_finish(proc, banner))
    port = int(banner.split("http://127.0.0.1:")[1].split("/")[0])
    status, body = _page(port)                                # rendered by a page worker of the fork server
    _wait_workers_idle(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)                        # Ctrl-C: the whole process group
    code, said = _finish(proc, banner)
    assert status == 200 and b"tokens" in body
    assert code == 0, said
    for bad in ("Traceback", "KeyboardInterrupt", "ForkServerProcess"):
        assert bad not in said, said


@pytest.mark.parametrize(("signum", "group"), [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["sigterm", "ctrl-c"])
def test_the_demo_stopped_by_a_signal_leaks_no_semaphore(signum: int, group: bool) -> None:
    proc = _popen("demo")
    assert proc.stderr is not None
    said = ""
    while "[1/5] baseline" not in said:                       # its server (and the page pools) are up
        line = proc.stderr.readline()
        assert line, _finish(proc, said)
        said += line
    if group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    code, said = _finish(proc, said)
    assert code == 128 + signum, said
    assert said.endswith(f"tokenwire demo: stopped by {signal.Signals(signum).name}\n"), said
    for bad in ("leaked semaphore", "Traceback", "KeyboardInterrupt", "resource_tracker"):
        assert bad not in said, said


def test_tokenwire_serve_prints_its_url_serves_and_stops_on_ctrl_c() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "serve", "--port", "0", "--quiet",
                             "--heartbeat-s", "5"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("tokenwire serving on http://127.0.0.1:"), line
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/stream?tokens=3")
        response = conn.getresponse()
        assert response.status == 200 and b"event: done" in response.read()
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode in (0, 130)
