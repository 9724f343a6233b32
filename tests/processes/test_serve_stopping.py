"""``tokenwire serve`` as a real process, on both event loops: what it says while it stops, and what it leaves behind.

Each test starts ``python -m tokenwire serve --port 0`` (``support.served``) and reads its port from the banner.
After SIGTERM the server says in one line how many streams it waits for and for how long; killed with SIGKILL it
leaves no helper process (forkserver, resource tracker, page workers) alive; its access log gives an event
stream's bytes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.live import await_until, wait_until
from support.requirements import ROOT
from support.served import serve

IO_TIMEOUT_S = 30.0
LOOPS = ["asyncio", "uvloop"]


def _open_stream(port: int, target: str) -> socket.socket:
    """A connection whose event stream has started (its first token arrived)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = b""
    while b"event: token" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return sock


# -- one line while the streams finish ------------------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
def test_sigterm_says_how_many_streams_it_waits_for_and_the_grace(loop: str) -> None:
    with serve(loop, "--grace-s", "10") as server:
        streams = [_open_stream(server.port, "/stream?tokens=60&producer_ms=50") for _ in range(2)]
        server.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: any("stopping" in line for line in server.err_lines), "the stopping line",
                   timeout_s=2.0)             # said at once, long before the 3 s the streams still need
        said = [line for line in server.err_lines if "stopping" in line]
        running = server.proc.poll() is None
        for sock in streams:
            sock.close()
        code = server.wait()
    assert said == ["tokenwire serve: stopping: waiting up to 10 s for 2 open streams to finish\n"], server.err_lines
    assert running and code == 0
    assert not any("Traceback" in line for line in server.err_lines)


@pytest.mark.parametrize("loop", LOOPS)
def test_quiet_sigterm_says_nothing(loop: str) -> None:
    with serve(loop, "--grace-s", "10", "--quiet") as server:
        sock = _open_stream(server.port, "/stream?tokens=20&producer_ms=50")
        server.proc.send_signal(signal.SIGTERM)
        code = server.wait()
        sock.close()
    assert code == 0 and server.err_lines == []


# -- SIGKILL leaves no helper process ----------------------------------------------------
def _stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, ppid, start time)`` of ``pid`` from ``/proc``, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0], int(fields[1]), int(fields[19])


def _descendants(root: int) -> dict[int, int]:
    """Every process below ``root`` (the ppid walk of ``/proc``), each with its start time."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(stat[1], []).append(int(entry.name))
            starts[int(entry.name)] = stat[2]
    found, todo = {}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def _alive(pid: int, start: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[2] == start and stat[0] not in ("Z", "X")     # a zombie has exited


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")
@pytest.mark.parametrize("loop", LOOPS)
def test_sigkill_leaves_no_helper_process(loop: str) -> None:
    with serve(loop, "--quiet") as server:
        pages = [threading.Thread(target=server.get, args=("/?format=html",)),      # the page workers start
                 threading.Thread(target=server.get, args=("/?clock=real&format=json&tokens=5",))]
        for page in pages:
            page.start()
        for page in pages:
            page.join(IO_TIMEOUT_S)
        helpers = _descendants(server.proc.pid)
        server.proc.send_signal(signal.SIGKILL)
        server.wait()

        def left() -> list[int]:
            return [pid for pid, start in helpers.items() if _alive(pid, start)]

        def described() -> str:
            return f"every helper to exit; still running: {[_cmdline(pid) for pid in left()]}"
        wait_until(lambda: not left(), described, timeout_s=5.0)
    assert len(helpers) >= 3, helpers            # the fork server, the resource tracker, page workers


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120]
    except OSError:
        return b"(gone)"


def test_a_page_pool_whose_worker_was_killed_is_replaced() -> None:
    """A worker killed from outside (the OOM killer, or its fork server's death) costs one retry, not a broken pool."""
    import asyncio

    from tokenwire.live.pages import Pages

    async def run() -> tuple[int, int, int]:
        pages = Pages(1, 1)
        try:
            first = (await pages.render("/?format=json&tokens=5")).status
            worker = await asyncio.wrap_future(pages.pages.submit(os.getpid))     # the pool's one worker
            start = _stat(worker)
            assert start is not None and worker != os.getpid()
            os.kill(worker, signal.SIGKILL)
            await await_until(lambda: not _alive(worker, start[2]), "the killed worker to be gone")
            second = (await pages.render("/?format=json&tokens=5")).status
            return first, second, pages.in_flight
        finally:
            pages.close()
    assert asyncio.run(run()) == (200, 200, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_helper_whose_parent_died_before_it_asked_exits_at_once() -> None:
    """The race ``PR_SET_PDEATHSIG`` leaves open: the parent died before the request; ``getppid`` tells."""
    code = (
        "import os, sys, time\n"
        "from tokenwire.live.pages import die_with_parent\n"
        "parent = os.getpid()\n"
        "if os.fork() == 0:\n"
        "    while os.getppid() == parent:\n"        # until the parent has exited: re-parented
        "        time.sleep(0.001)\n"
        "    die_with_parent(parent, os.getppid())\n"
        "    print('survived', flush=True)\n"
        "    os._exit(0)\n"
        "os._exit(0)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env,
                          check=False)                # returns when the grandchild has closed the pipe too
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


# -- the access log counts what an event stream sent ------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
def test_the_access_log_gives_an_event_streams_bytes(loop: str) -> None:
    with serve(loop) as server:
        status, body = server.get("/stream?tokens=5&producer_ms=1")
        wait_until(lambda: any('"GET /stream?tokens=5&producer_ms=1"' in line for line in server.err_lines),
                   "the stream's access log line", timeout_s=IO_TIMEOUT_S)
        lines = [line for line in server.err_lines if '"GET /stream?tokens=5&producer_ms=1"' in line]
        server.proc.send_signal(signal.SIGTERM)
        assert server.wait() == 0
    assert status == 200 and body.count(b"event: token") == 5
    (line,) = lines
    assert line.split()[-2:] == ["200", str(len(body))], line       # every byte the stream sent, not 0



# -- SIGTERM with the Redis log and more open streams than the grace lets finish -------------
@pytest.mark.parametrize("loop", LOOPS)
def test_sigterm_on_redis_with_streams_past_the_grace_exits_without_a_traceback(loop: str, own_redis: object) -> None:
    url = own_redis.url  # type: ignore[attr-defined]
    with serve(loop, "--grace-s", "0.5", "--log", url) as server:
        streams = [_open_stream(server.port, "/stream?tokens=200&producer_ms=20") for _ in range(40)]
        server.proc.send_signal(signal.SIGTERM)
        code = server.wait()
        for sock in streams:
            sock.close()
    said = "".join(server.err_lines)
    assert code == 0, said
    for bad in ("Traceback", "Task was destroyed", "was never awaited", "no running event loop", "Error"):
        assert bad not in said, said
