"""An upstream whose one event never ends (50 MB of ``data: xy`` lines, no blank line), over real sockets.

A loopback server (``support.endless_event``) sends it; the client, ``tokenwire
read`` and ``tokenwire proxy`` each fail the stream by name (the decoder's
``max_event`` bound) long before the 50 MB are sent, and their memory grows
by less than 32 MB: the probe saw 530 MB for ``tokenwire read`` and 447 MB
for the proxy.  Peak memory is the process's own high-water mark
(``ru_maxrss`` from ``wait4`` for ``tokenwire read``, ``VmHWM`` for the
proxy), compared with the same process reading a short stream.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.asgi import ROOT
from support.endless_event import LIMIT_BYTES, EndlessEvent

from tokenwire.client import ProtocolError, events

# What reading the never-ending event may add to a process's peak memory (the bound).
GROWTH_LIMIT_BYTES = 32 << 20
START_TIMEOUT_S = 15.0
BOUND = r"SSE event longer than max_event=2097152 characters \(saw \d+\)"


@pytest.fixture(scope="module")
def upstream() -> Iterator[EndlessEvent]:
    with EndlessEvent() as server:
        yield server


def test_the_client_raises_protocol_error_naming_the_bound(upstream: EndlessEvent) -> None:
    before = upstream.sent
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError) as raised:
            list(events(upstream.url + "/streams/abc/events", max_attempts=1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert re.fullmatch(f"/streams/abc/events: {BOUND}", str(raised.value))
    assert upstream.sent - before < LIMIT_BYTES / 2
    assert peak < GROWTH_LIMIT_BYTES


def read_peak(url: str, tmp_path: Path) -> tuple[int, str, int]:
    """Run ``tokenwire read url``: its exit status, its stderr and its peak RSS in bytes."""
    err = tmp_path / "stderr"
    with open(tmp_path / "stdout", "wb") as out, open(err, "wb") as errors:
        proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "read", url, "--max-attempts", "1"],
                                cwd=ROOT, stdout=out, stderr=errors)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, err.read_text(), usage.ru_maxrss * 1024


def test_tokenwire_read_says_one_line_and_exits_1_with_memory_flat(upstream: EndlessEvent, tmp_path: Path) -> None:
    status, said, baseline = read_peak(upstream.url + "/short", tmp_path)
    assert (status, said) == (0, "")
    status, said, peak = read_peak(upstream.url + "/streams/abc/events", tmp_path)
    assert status == 1
    assert re.fullmatch(f"tokenwire read: /streams/abc/events: {BOUND}\n", said)
    assert peak - baseline < GROWTH_LIMIT_BYTES


class Proxy:
    """One ``tokenwire proxy`` process in front of ``upstream``; ``url`` is its base URL."""

    def __init__(self, upstream: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "TOKENWIRE_LOG_URL"}
        self.proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "proxy", "--upstream", upstream,
                                      "--port", "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not box or "serving on http://127.0.0.1:" not in box[0]:
            self.proc.kill()
            raise RuntimeError(f"the proxy did not start: {box!r} {self.proc.communicate()[1]!r}")
        self.url = box[0].split(" ")[4].rstrip("/")

    def peak(self) -> int:
        """The process's peak RSS so far, in bytes."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"^VmHWM:\s+(\d+) kB$", status, re.M).group(1)) * 1024  # type: ignore[union-attr]

    def chat(self, model: str) -> list[object]:
        body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        with httpx.stream("POST", self.url + "/v1/chat/completions", json=body, timeout=30) as response:
            assert response.status_code == 200
            text = response.read().decode()
        return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: {")]

    def stop(self) -> str:
        self.proc.terminate()
        return self.proc.communicate(timeout=15)[1]


def test_the_proxy_fails_the_answer_by_name_with_memory_flat(upstream: EndlessEvent) -> None:
    proxy = Proxy(upstream.url + "/v1")
    try:
        for _ in range(2):                                           # warm: every module the answer needs loaded
            assert proxy.chat("short")[-1]["choices"][0]["finish_reason"] == "stop"  # type: ignore[index]
        baseline, before = proxy.peak(), upstream.sent
        chunks = proxy.chat("endless")
        peak = proxy.peak()
    finally:
        log = proxy.stop()
    assert chunks[-1] == {"error": {"message": "the model raised UpstreamMalformed", "type": "server_error",
                                    "code": None}}
    assert re.search(f"UpstreamMalformed: the upstream's event stream cannot be read: {BOUND}\n", log)
    assert upstream.sent - before < LIMIT_BYTES / 2
    assert peak - baseline < GROWTH_LIMIT_BYTES
