"""``tokenwire serve`` gives memory back after bursts of large bodies, as uvicorn does.

Three bursts of 400 ``POST /chat``, each body just under 1 MiB, against a
``tokenwire serve`` process: after each burst its resident memory comes back
to within ``MARGIN_MB`` of what it was before the first, within ``BACK_WITHIN_S``
(the bound of the wait, not a time asserted: the test waits for the memory to
come down and fails only if it never does).  Before, it climbed 33 → 934 →
1,164 → 1,750 MB and stayed there.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from support.live import wait_until
from support.processes import stop

BURSTS = 3
PER_BURST = 400
BODY_BYTES = 1024 * 1024 - 512          # just under serve's 1 MiB limit on a chat body
MARGIN_MB = 64
BACK_WITHIN_S = 30.0


def _rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def _body(i: int) -> bytes:
    text = "x" * (BODY_BYTES - 200)
    body = json.dumps({"id": f"chat-{i}", "messages": [{"id": "m", "role": "user",
                                                         "parts": [{"type": "text", "text": text}]}],
                       "trigger": "submit-message"}).encode()
    assert len(body) < 1024 * 1024
    return body


async def _post(port: int, body: bytes) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 60)
    writer.close()
    return int(answer.split(b" ", 2)[1])


async def _burst(port: int, first: int) -> list[int]:
    return await asyncio.gather(*(_post(port, _body(first + i)) for i in range(PER_BURST)))


def test_rss_comes_back_within_64_mb_after_each_burst_of_large_bodies() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "serve", "--port", "0", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    try:
        banner = proc.stdout.readline()
        port = int(banner.split("http://127.0.0.1:")[1].split("/")[0].strip())
        baseline = _rss_mb(proc.pid)
        seen: list[tuple[int, int]] = []
        for burst in range(BURSTS):
            codes = asyncio.run(_burst(port, burst * PER_BURST))
            assert set(codes) == {200}, f"burst {burst}: statuses {sorted(set(codes))}"
            peak = _rss_mb(proc.pid)
            what = f"RSS back within {MARGIN_MB} MB of {baseline} MB after burst {burst} (peak {peak} MB)"
            back = wait_until(lambda: (rss := _rss_mb(proc.pid)) <= baseline + MARGIN_MB and rss,
                              what, timeout_s=BACK_WITHIN_S)
            seen.append((peak, back))
    finally:
        stop(proc, 15, 10)
        proc.stdout.close()
