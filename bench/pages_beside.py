"""Item 5b: report pages beside streams: 200 streams at 20 ms while 20 clients fetch report pages back to back.

How this works: one ``tokenwire serve`` process, item 5's client reading N
streams, and meanwhile ``CLIENTS`` threads of this process each fetching
``PAGE`` (the default report as HTML, the heaviest page) over and over
until the streams are done.  The pages render in the server's page
threads, so the goal is that the streams do not notice: ITL p95 within
1.5x nominal, every stream complete, while the pages keep being served.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable

from .common import Row
from .scale import GOAL_P95, PRODUCER_MS, TOKENS, one_step

__all__ = ["run"]

CLIENTS = 20
PAGE = "/?format=html"
STREAMS = 200


def _fetchers(port: int) -> Callable[[], str]:
    stop = threading.Event()
    counts = {"ok": 0, "other": 0}
    lock = threading.Lock()

    def fetch() -> None:
        while not stop.is_set():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                conn.request("GET", PAGE)
                response = conn.getresponse()
                response.read()
                key = "ok" if response.status == 200 else "other"
            except (OSError, http.client.HTTPException):
                key = "other"
            finally:
                conn.close()
            with lock:
                counts[key] += 1

    threads = [threading.Thread(target=fetch, daemon=True) for _ in range(CLIENTS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()

    def done() -> str:
        stop.set()
        for thread in threads:
            thread.join(30)
        seconds = time.monotonic() - started
        return (f"{CLIENTS} clients fetched {counts['ok']} pages ({counts['ok'] / seconds:.0f}/s) and got "
                f"{counts['other']} other answers while the streams ran")
    return done


def run(quick: bool) -> list[Row]:
    n, tokens = (40, 50) if quick else (STREAMS, TOKENS)
    step = one_step("tokenwire", n, tokens, beside=_fetchers)
    ratio = step.p95_ratio
    held = step.client["complete"] == n and ratio is not None and ratio <= GOAL_P95
    notes = (f"{n} streams of {tokens} tokens at {PRODUCER_MS:g} ms beside {CLIENTS} clients fetching {PAGE} "
             f"back to back: {step.client.get('beside')}", step.describe())
    return [Row(5, f"pages beside {n} streams: ITL p95 / nominal", "-" if ratio is None else f"{ratio:.2f}x",
                f"{step.client['complete']}/{n} complete", None, f"<= {GOAL_P95}x", held, notes)]
