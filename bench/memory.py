"""Item 6: resident memory of 100 slow readers, bounded ``block`` channel vs an unbounded queue.

How this works: each variant runs in a fresh interpreter (``python -m
bench.memory VARIANT STREAMS TOKENS``), so one variant's freed memory
cannot hide in the other's heap.  Each of the 100 streams is the core's own
``Stream`` with its producer and writer, driven by the core's
``Simulation`` on a ``VirtualClock`` (so 100 streams x thousands of tokens
take seconds, not minutes, and every run is the same): the producer steps
every 0.5 ms, the reader takes 5 ms per token (10x slower).  Every stream
is stopped at the same virtual instant, when an unbounded producer has
just generated the whole answer, and kept alive; then resident memory
(``/proc/self/statm``) is compared with what it was before the first
stream started.  That is the moment a server with 100 such streams that
all started together holds the most.

The variants differ only in the channel handed to ``Stream.serve``:
``block`` is the core's ``BoundedChannel`` (capacity 4); ``unbounded`` is
the same class with an ``offer`` that always queues (a deque with no
limit), so the producer never waits.  The reader is a minimal wire that
only counts what it is handed, so its own record keeping is not measured.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from typing import Any

from tokenwire.core.channel import BoundedChannel, Outcome
from tokenwire.core.clock import VirtualClock, ms_to_ns
from tokenwire.core.effects import Process, TokenItem
from tokenwire.core.model import ANSWER, Model, TimingModel
from tokenwire.core.simulate import Simulation
from tokenwire.core.stream import Stream
from tokenwire.core.tokenlog import MemoryTokenLog

from .common import ROOT, Row, env_with_root

__all__ = ["run"]

STREAMS = 100
PRODUCER_MS = 0.5
READER_MS = 5.0
CAPACITY = 4


class UnboundedChannel(BoundedChannel[TokenItem]):
    """The baseline: queues every offer, like a deque with no limit."""

    def offer(self, item: TokenItem) -> Outcome:
        if self.reader_gone or self._closed:
            return Outcome.CLOSED
        self._push(item)
        return Outcome.ACCEPTED


class CountingReader:
    """A wire that takes ``reader_ns`` per frame and keeps only a count."""

    def __init__(self, reader_ns: int) -> None:
        self.reader_ns, self.free_at, self.frames = reader_ns, 0, 0

    def ready_at(self) -> int:
        return self.free_at

    def deliver(self, frame: bytes, now: int) -> bool:
        self.frames += 1
        self.free_at = now + self.reader_ns
        return True


class _Stop(Exception):
    pass


def _stop() -> None:
    raise _Stop


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one_stream(variant: str, answer: tuple[str, ...], stops: tuple[int, ...]) -> tuple[Any, ...]:
    """Set up one stream on its own virtual clock, to stop at each of ``stops``; return its parts."""
    clock = VirtualClock()
    step = ms_to_ns(PRODUCER_MS)
    model = Model(answer, TimingModel(step_ns=step, ttft_ns=step, jitter=0.0))
    stream = Stream(f"s{variant}", model, MemoryTokenLog(clock.now), capacity=CAPACITY)
    channel = UnboundedChannel(CAPACITY) if variant == "unbounded" else stream.new_channel()
    reader = CountingReader(ms_to_ns(READER_MS))

    def client() -> Process:
        return (yield from stream.serve(-1, channel))

    sim = Simulation(clock)
    sim.spawn(client(), reader)
    for at in stops:
        clock.call_at(at, _stop)
    return sim, stream, channel, reader


def _advance(sim: Simulation) -> None:
    """Run ``sim`` to its next stop."""
    try:
        sim.run()
    except _Stop:
        pass


def measure(variant: str, streams: int, tokens: int) -> dict[str, Any]:
    """Run ``streams`` streams of one variant in this process; return the figures.

    Resident memory is read at two instants, half way and when the
    unbounded producer has generated the whole answer.
    """
    answer = tuple(ANSWER[i % len(ANSWER)] for i in range(tokens))
    end = tokens * ms_to_ns(PRODUCER_MS)
    gc.collect()
    before = _rss()
    alive = [one_stream(variant, answer, (end // 2, end)) for _ in range(streams)]
    growth = []
    for _ in range(2):
        for parts in alive:
            _advance(parts[0])
        gc.collect()
        growth.append(_rss() - before)
    return {
        "variant": variant, "streams": streams, "tokens": tokens, "seconds": [end / 2e9, end / 1e9],
        "rss_growth_bytes": growth,
        "generated": sum(s[1].log.length(s[1].stream_id) for s in alive),
        "queued": sum(len(s[2]) for s in alive),
        "delivered": sum(s[3].frames for s in alive),
    }


def _in_subprocess(variant: str, streams: int, tokens: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "bench.memory", variant, str(streams), str(tokens)],
                         cwd=ROOT, env=env_with_root(), capture_output=True, text=True, timeout=300, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def run(quick: bool) -> list[Row]:
    tokens = 2_000 if quick else 20_000
    got = {v: _in_subprocess(v, STREAMS, tokens) for v in ("block", "unbounded")}
    half, end = got["block"]["seconds"]
    at_end = {v: g["rss_growth_bytes"][1] / STREAMS for v, g in got.items()}
    slope = {v: (g["rss_growth_bytes"][1] - g["rss_growth_bytes"][0]) / STREAMS / (end - half) for v, g in got.items()}
    b, u = got["block"], got["unbounded"]
    held = (u["queued"] - b["queued"]) / STREAMS
    notes = (
        f"{STREAMS} streams of {tokens:,} tokens, producer {PRODUCER_MS} ms, reader {READER_MS} ms (10x slower), "
        f"core Stream + Simulation on a virtual clock, every stream held at {half:g} s and {end:g} s "
        "(the unbounded producer's end); RSS from /proc/self/statm, each variant in a fresh interpreter",
        f"at {end:g} s per stream: block generated {b['generated'] // STREAMS:,}, queued {b['queued'] // STREAMS}; "
        f"unbounded generated {u['generated'] // STREAMS:,}, queued {u['queued'] // STREAMS:,}; "
        f"both delivered {b['delivered'] // STREAMS:,} frames",
        f"unbounded costs {(at_end['unbounded'] - at_end['block']) / held:.0f} bytes per token it holds "
        "(TokenItem + index int + deque slot, plus the log, trace and step-count entries of tokens generated ahead)",
        "block still grows a little: the core keeps a TraceEntry per channel decision, a log entry and a step "
        "count per token, and Model precomputes one cost int per token of the answer; all O(tokens delivered)",
    )
    return [
        Row(6, f"RSS per slow stream at {end:g} s", f"block {at_end['block'] / 1024:.0f} KiB",
            f"unbounded {at_end['unbounded'] / 1024:.0f} KiB", at_end["unbounded"] / max(at_end["block"], 1.0),
            "", None, notes),
        Row(6, "RSS growth rate per slow stream", f"block {slope['block'] / 1024:.0f} KiB/s",
            f"unbounded {slope['unbounded'] / 1024:.0f} KiB/s", slope["unbounded"] / max(slope["block"], 1.0),
            "", None, notes),
    ]


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
