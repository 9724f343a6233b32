"""``tokenwire serve`` as a process, stopped mid-stream: killed and restarted on the same port, a resume of the stream
it was sending is a 404 that names the restart (the memory log went with the process), and SIGTERM or SIGINT
while a stream is sent exits without a traceback.  (The other faults, on a server in this process:
``servers/test_faults.py``.)
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys

import pytest
from support.live import (
    TIMEOUT_S,
    error_of,
    read_head,
    read_to_end,
    read_until_tokens,
)
from support.requirements import ROOT

from tokenwire.core.sse import Decoder


def _gone_message(stream_id: str) -> str:
    return (f"unknown stream {stream_id!r}: never created here, evicted from the token log (too old or too many "
            f"streams), or lost when the server restarted; start a new one with POST /streams")


def _start_server(port: int = 0) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("TOKENWIRE_LOG_URL", None)          # the in-memory log: what a restart loses
    proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "serve", "--port", str(port), "--quiet"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("tokenwire serving on http://127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
    return proc, int(line.split("http://127.0.0.1:")[1].split("/")[0])


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(TIMEOUT_S)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def test_a_resume_after_a_server_restart_is_a_404_that_names_the_restart() -> None:
    old, port = _start_server()
    new = None
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
        sock.sendall(b"GET /stream?tokens=277&producer_ms=20 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_head(sock)[0] == 200
        decoder = Decoder()
        got, _ = read_until_tokens(sock, decoder, 3)
        sid = json.loads(got[0].data)["stream_id"]
        old.send_signal(signal.SIGKILL)                 # the process dies mid-stream
        got += decoder.feed(read_to_end(sock))
        sock.close()
        old.wait(TIMEOUT_S)
        new, _ = _start_server(port)                    # the same address, a fresh process
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
        conn.request("GET", f"/streams/{sid}/events", headers={"Last-Event-ID": decoder.last_event_id})
        response = conn.getresponse()
        status, body = response.status, response.read()
        conn.close()
    finally:
        _stop(old)
        if new is not None:
            _stop(new)
    ids = [int(e.id) for e in got if e.event == "token"]
    assert len(ids) >= 3 and ids == list(range(len(ids))) and "done" not in [e.event for e in got]
    assert status == 404 and error_of(body) == _gone_message(sid)


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_serve_stops_cleanly_on_a_signal_mid_stream(signal_name: str) -> None:
    proc, port = _start_server()
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
        sock.sendall(b"GET /stream?tokens=277&producer_ms=20 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_head(sock)[0] == 200
        read_until_tokens(sock, Decoder(), 2)
        proc.send_signal(getattr(signal, signal_name))
        proc.wait(TIMEOUT_S)
        sock.close()
        assert proc.stderr is not None
        stderr = proc.stderr.read()
    finally:
        _stop(proc)
    assert "Traceback" not in stderr, stderr
