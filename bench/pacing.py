"""Items 3 and 4: pacing on the real clock, and the block policy against its floor.

How this works: item 3 drives the core's own processes (``Stream.serve``
with its producer, a ``MemoryReader``, the event-loop driver on a
``RealClock``) with an answer of 2,000 tokens (the 277-token answer
repeated: ``RunSpec`` stops at 277), a 0.5 ms step, no jitter and a TTFT of
one step, so the nominal end-to-end is exactly tokens x 0.5 ms.  Beside it
runs the plain loop the core replaces: a thread that ``time.sleep``s one
period, encodes the frame and puts it on a queue, and a reader thread that
decodes it, with the same encoder and decoder.

Item 4 runs ``pipeline.run`` on the real clock with the ``block`` policy
and a reader slower than the producer.  Nothing can deliver the answer
faster than the first token's cost plus one reader period per token, so
measured wall time over that floor is the policy's whole overhead.
"""

from __future__ import annotations

import queue
import statistics
import threading
import time

from tokenwire.core.clock import RealClock, ms_to_ns
from tokenwire.core.effects import Process, TokenItem
from tokenwire.core.frames import token_frame
from tokenwire.core.metrics import timing_from_arrivals
from tokenwire.core.model import ANSWER, Model, TimingModel
from tokenwire.core.pipeline import RunSpec
from tokenwire.core.pipeline import run as run_pipeline
from tokenwire.core.reader import MemoryReader
from tokenwire.core.sse import Decoder
from tokenwire.core.stream import Stream
from tokenwire.core.tokenlog import MemoryTokenLog
from tokenwire.realtime import LoopDriver

from .common import Row

__all__ = ["run"]

PERIOD_MS = 0.5
TOKENS = 2_000


def long_answer(tokens: int) -> tuple[str, ...]:
    """The 277-token answer repeated to ``tokens`` tokens."""
    return tuple(ANSWER[i % len(ANSWER)] for i in range(tokens))


def core_arrivals(tokens: int, period_ms: float) -> list[int]:
    """Run the core's stream on real threads; return token arrivals in ns since the request."""
    clock = RealClock()
    step = ms_to_ns(period_ms)
    model = Model(long_answer(tokens), TimingModel(step_ns=step, ttft_ns=step, jitter=0.0, seed=1))
    stream = Stream("bench", model, MemoryTokenLog(clock.now), capacity=64)
    reader = MemoryReader(0)

    def client() -> Process:
        reader.begin_connection()
        return (yield from stream.serve(-1, stream.new_channel()))

    driver = LoopDriver.private(clock)
    driver.spawn(client(), reader)
    driver.run()
    if reader.ids != list(range(tokens)):
        raise RuntimeError(f"the core delivered {len(reader.ids)} of {tokens} tokens, or out of order")
    return reader.arrivals


def sleep_loop_arrivals(tokens: int, period_ms: float) -> list[int]:
    """The plain loop: sleep(period), encode, put; a reader thread decodes. Arrivals in ns."""
    texts = long_answer(tokens)
    frames: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    arrivals: list[int] = []
    start = time.perf_counter_ns()

    def produce() -> None:
        for i, text in enumerate(texts):
            time.sleep(period_ms / 1e3)
            frames.put(token_frame(TokenItem(i, text)))
        frames.put(None)

    def read() -> None:
        decoder = Decoder()
        while (frame := frames.get()) is not None:
            for _ in decoder.feed(frame):
                arrivals.append(time.perf_counter_ns() - start)

    threads = [threading.Thread(target=produce), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return arrivals


def clock_arrivals(tokens: int, period_ms: float) -> list[int]:
    """The clock alone: one thread, ``RealClock.sleep_until`` each deadline, stamp. Arrivals in ns."""
    clock = RealClock()
    step = ms_to_ns(period_ms)
    arrivals = []
    for i in range(1, tokens + 1):
        clock.sleep_until(i * step)
        arrivals.append(clock.now())
    return arrivals


def _pacing(arrivals: list[int], tokens: int, period_ms: float) -> tuple[float, float]:
    """Return (throughput / nominal, ITL p95 / nominal) for one run."""
    timing = timing_from_arrivals(arrivals)
    nominal_s = tokens * period_ms / 1e3
    assert timing.itl_p95_ms is not None
    return nominal_s / (timing.total_ms / 1e3), timing.itl_p95_ms / period_ms


def pacing_rows(quick: bool) -> list[Row]:
    runs = 1 if quick else 5
    ours = [_pacing(core_arrivals(TOKENS, PERIOD_MS), TOKENS, PERIOD_MS) for _ in range(runs)]
    plain = [_pacing(sleep_loop_arrivals(TOKENS, PERIOD_MS), TOKENS, PERIOD_MS) for _ in range(runs)]
    alone = [_pacing(clock_arrivals(TOKENS, PERIOD_MS), TOKENS, PERIOD_MS) for _ in range(runs)]
    tput, p95 = statistics.median(o[0] for o in ours), statistics.median(o[1] for o in ours)
    ptput, pp95 = statistics.median(o[0] for o in plain), statistics.median(o[1] for o in plain)
    note = (f"{TOKENS:,} tokens at {PERIOD_MS} ms, jitter 0, TTFT one step, reader 0 ms, buffer 64; "
            f"median of {runs} run(s) each; baseline: time.sleep(period) loop + queue + same codec",
            f"the clock alone (one thread stamping after each RealClock.sleep_until, no pipeline): throughput "
            f"{statistics.median(o[0] for o in alone):.3f}, ITL p95 {statistics.median(o[1] for o in alone):.3f}x; "
            "the pipeline adds its per-token path between the producer's deadline and the reader's stamp (log, "
            "channel, the loop's wake of the writer, encode, decode: tens of us), whose variation sets the rest "
            "of its p95")
    return [
        Row(3, "pacing: throughput / nominal 2,000 tok/s", f"{tput:.3f}", f"sleep loop {ptput:.3f}",
            tput / ptput, ">= 0.99", tput >= 0.99, note),
        Row(3, "pacing: ITL p95 / nominal 0.5 ms", f"{p95:.3f}", f"sleep loop {pp95:.3f}",
            pp95 / p95, "<= 1.10", p95 <= 1.10, note),
    ]


def floor_rows(quick: bool) -> list[Row]:
    runs = 1 if quick else 3
    rows = []
    for reader_ms in (1.0, 3.0):
        spec = RunSpec(tokens=len(ANSWER), policy="block", capacity=4, reader_ms=reader_ms,  # type: ignore[arg-type]
                       producer_ms=PERIOD_MS, clock="real")  # type: ignore[arg-type]
        floor_ns = spec.timing().costs(1)[0] + spec.tokens * ms_to_ns(reader_ms)
        ratios = []
        for _ in range(runs):
            result = run_pipeline(spec, LoopDriver.private())
            if result.ids != tuple(range(spec.tokens)):
                raise RuntimeError("the block run lost or reordered tokens")
            ratios.append(result.wall_ns / floor_ns)
        ratio = statistics.median(ratios)
        rows.append(Row(4, f"block, reader {reader_ms:g} ms: wall / floor", f"{ratio:.4f}",
                        f"floor {floor_ns / 1e6:.1f} ms", None, "<= 1.02", ratio <= 1.02,
                        (f"{spec.tokens} tokens, producer {PERIOD_MS} ms (jitter {spec.jitter}), buffer 4, "
                         f"real clock; floor = first token's cost + tokens x reader period; median of {runs}",)))
    return rows


def run(quick: bool) -> list[Row]:
    return pacing_rows(quick) + floor_rows(quick)
