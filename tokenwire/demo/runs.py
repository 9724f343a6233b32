"""The demo's runs: the full answer over real loopback sockets, then the report measured over them.

How this works: a ``LiveServer`` runs in this process on 127.0.0.1 (port 0),
with ``SO_SNDBUF`` shrunk on its event-stream sockets; a raw-socket client
with ``SO_RCVBUF`` shrunk before ``connect`` reads each stream slowly: it
``recv``s at most ``RECV_CHUNK`` bytes at a time and takes one token every
``reader_ms`` (deadline-paced on the server's ``RealClock``).  So the
application buffer (the stream's channel) and the kernel's buffers are both
small, and both are measured: each time the reader takes a token it reads
the server socket's send queue (``TIOCOUTQ``), its own receive queue
(``FIONREAD``), the bytes the server had handed to the kernel and it had not
yet read (converted to whole token frames with the wire's frame offsets),
and the channel's depth.

The runs are part of the report's own plan (``plan.plan_demo``):
``baseline`` (a fast reader, block, a 64-slot buffer), ``block`` and
``drop-newest`` (the slow reader, the small buffer) and ``cancel`` over two
connections, ``cut`` (the reader hangs up after ``cut_after`` tokens) and
``resume`` (it reconnects ``retry`` ms later with ``Last-Event-ID`` and
completes the answer).  Each run becomes the core's ``RunResult`` (frames
as received, arrival times, the server's channel statistics and trace,
model steps), the record the in-memory runs produce, and
``report.assemble`` builds the report from them with the kernel figures as
section 5 (``transport.Sockets``); ``render.render_report`` lays it out with
the page's templates.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..core.clock import ms_to_ns
from ..core.pipeline import ConnectionRecord, RunResult, RunSpec, merge_stats
from ..core.stream import Stream, TraceEntry
from ..endpoints.config import ConnectionLog, LiveConfig
from ..endpoints.registry import Registry
from ..live.server import LiveServer, make_server
from ..report.model import assemble
from ..report.params import ReportParams
from ..report.plan import DEMO_PARAMS, plan_demo
from ..report.render import render_report
from ..report.transport import InMemory, KernelFigures, Sockets, in_memory
from .client import CONNECTION_TIMEOUT_S, RECV_CHUNK, Client, kernel_figures, read_stream

__all__ = ["CONNECTIONS", "DEMO_RCVBUF", "DEMO_SNDBUF", "DemoRuns", "DemoSettings", "demo_report", "run_demo"]

# What the demo asks the kernel for on its stream sockets.  Linux doubles the
# figure for its bookkeeping and enforces a floor (about 4.6 KB for sending,
# 2.3 KB for receiving); asking for 4 KiB each keeps the kernel's queue to a
# few dozen token frames, where autotuning would let it hold the whole
# answer (about 11 KB) several times over.
DEMO_SNDBUF = 4096
DEMO_RCVBUF = 4096
# The connections, in the order they run (the progress lines count them).
CONNECTIONS = ("baseline", "block", "drop-newest", "cut", "resume")


@dataclass(frozen=True, slots=True)
class DemoRuns:
    """What the demo measured.

    runs: the core's records, named as ``plan.plan_demo`` names them;
    connections: the kernel figures of each of ``CONNECTIONS``;
    sent_when_noticed: token frames the server had sent when it noticed the
    cut (a failed write).
    """

    runs: Mapping[str, RunResult]
    connections: Mapping[str, KernelFigures]
    sent_when_noticed: int


# -- the runs -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DemoSettings:
    """What the demo runs: the report's parameters (``DEMO_PARAMS`` by default) and the kernel buffers asked for."""

    params: ReportParams = DEMO_PARAMS
    sndbuf: int | None = DEMO_SNDBUF
    rcvbuf: int | None = DEMO_RCVBUF

    @staticmethod
    def query(spec: RunSpec) -> str:
        """The ``POST /streams`` query that makes the server's stream for ``spec``."""
        scenario = "baseline" if spec.stream_id == "baseline" else spec.policy.value
        return (f"scenario={scenario}&tokens={spec.tokens}&buffer={spec.capacity}"
                f"&producer_ms={spec.producer_ms:g}&seed={spec.seed}")


Progress = Callable[[str, int, int], None]


def _create(server: LiveServer, query: str) -> str:
    host, port = server.address
    conn = http.client.HTTPConnection(host, port, timeout=CONNECTION_TIMEOUT_S)
    try:
        conn.request("POST", f"/streams?{query}")
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status != 201:
        raise RuntimeError(f"POST /streams?{query} answered {response.status}: {body[:200]!r}")
    return str(json.loads(body)["stream_id"])


def _connect(server: LiveServer, settings: DemoSettings, stream_id: str, spec: RunSpec, name: str,
             progress: Progress | None, hang_up_after: int | None = None,
             last_event_id: str | None = None) -> Client:
    def tick(n: int) -> None:
        if progress is not None:
            progress(name, n, spec.tokens)
    seen = read_stream(server, f"/streams/{stream_id}/events", reader_ms=spec.reader_ms,
                       rcvbuf=settings.rcvbuf, on_token=tick, hang_up_after=hang_up_after,
                       last_event_id=last_event_id)
    if seen.status != 200:
        raise RuntimeError(f"GET /streams/{stream_id}/events answered {seen.status}")
    return seen


def _result(spec: RunSpec, stream: Stream, seens: list[Client], logs: list[ConnectionLog],
            start: int, generated_before_next: list[int | None]) -> RunResult:
    records = tuple(
        ConnectionRecord(log.cursor + 1, len(seen.ids), seen.last_event_id, log.ending, log.stats, nxt)
        for seen, log, nxt in zip(seens, logs, generated_before_next, strict=True))
    last = seens[-1]
    end = last.done_at if last.done_at is not None else (last.arrivals[-1] if last.arrivals else start)
    return RunResult(
        spec=spec, frames=tuple(tuple(seen.frames) for seen in seens), connections=records,
        arrivals_ns=tuple(t - start for seen in seens for t in seen.arrivals),
        ids=tuple(i for seen in seens for i in seen.ids), texts=tuple(t for seen in seens for t in seen.texts),
        events_read=sum(seen.events for seen in seens), stats=merge_stats([log.stats for log in logs]),
        steps=dict(stream.source.steps), wall_ns=end - start,
        trace=tuple(TraceEntry(e.t_ns - start, e.index, e.decision, e.depth, e.waited_ns) for e in stream.trace),
    )


def _single(server: LiveServer, settings: DemoSettings, spec: RunSpec,
            progress: Progress | None) -> tuple[RunResult, KernelFigures]:
    stream_id = _create(server, settings.query(spec))
    start = server.clock.now()
    seen = _connect(server, settings, stream_id, spec, spec.stream_id, progress)
    log = _wait_logged(server, stream_id, 1)
    stream = server.registry.get(stream_id).stream
    return _result(spec, stream, [seen], [log], start, [None]), kernel_figures(seen, log)


def _entries(server: LiveServer, stream_id: str) -> list[ConnectionLog]:
    return [log for log in list(server.journal) if log.stream_id == stream_id]


def _logged(server: LiveServer, stream_id: str, count: int) -> bool:
    return len(_entries(server, stream_id)) >= count


def _wait_logged(server: LiveServer, stream_id: str, count: int) -> ConnectionLog:
    deadline = time.monotonic() + CONNECTION_TIMEOUT_S
    while not _logged(server, stream_id, count):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server did not log connection {count} of {stream_id!r} in time")
        time.sleep(0.001)
    return _entries(server, stream_id)[count - 1]


def _producer_stopped(server: LiveServer, stream: Stream) -> None:
    deadline = time.monotonic() + CONNECTION_TIMEOUT_S
    while stream.producer_running and time.monotonic() < deadline:
        time.sleep(0.001)


def _cut_and_resume(server: LiveServer, settings: DemoSettings, spec: RunSpec,
                    progress: Progress | None) -> tuple[RunResult, KernelFigures, KernelFigures, int]:
    """The cancel run over two connections: the run, each connection's kernel figures, frames sent at the cut."""
    stream_id = _create(server, settings.query(spec))
    stream = server.registry.get(stream_id).stream
    start = server.clock.now()
    first = _connect(server, settings, stream_id, spec, "cut", progress, hang_up_after=spec.hang_up_after)
    hung_up = server.clock.now()
    first_log = _wait_logged(server, stream_id, 1)
    _producer_stopped(server, stream)
    server.clock.sleep_until(hung_up + ms_to_ns(spec.retry_ms))      # as an EventSource waits `retry`
    at_reconnect = server.registry.log.length(stream_id)
    second = _connect(server, settings, stream_id, spec, "resume", progress, last_event_id=first.last_event_id)
    second_log = _wait_logged(server, stream_id, 2)
    both = _result(spec, stream, [first, second], [first_log, second_log], start, [at_reconnect, None])
    return both, kernel_figures(first, first_log), kernel_figures(second, second_log), first_log.tokens_sent


def run_demo(settings: DemoSettings | None = None, progress: Progress | None = None) -> DemoRuns:
    """Run ``plan.plan_demo`` over loopback, one connection after another; returns what it measured.

    Raises ``OSError`` if loopback cannot be bound, ``RuntimeError`` or
    ``TimeoutError`` if the server misbehaves (a bug).
    """
    settings = settings or DemoSettings()
    # With buffers this small a very slow reader reopens the TCP window only
    # every few seconds, so the demo waits as long as any connection may take.
    config = LiveConfig(sndbuf=settings.sndbuf, sample_queues=True, access_log=False,
                        write_timeout_s=CONNECTION_TIMEOUT_S)
    server = make_server(registry=Registry(keep_trace=True), config=config)
    thread = threading.Thread(target=server.serve_forever, name="tokenwire-demo-server",
                              daemon=True)
    thread.start()
    runs: dict[str, RunResult] = {}
    connections: dict[str, KernelFigures] = {}
    try:
        specs = plan_demo(settings.params, "real")
        for name in ("baseline", "block", "drop-newest"):
            runs[name], connections[name] = _single(server, settings, specs[name], progress)
        runs["cancel"], connections["cut"], connections["resume"], sent = _cut_and_resume(
            server, settings, specs["cancel"], progress)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(CONNECTION_TIMEOUT_S)
    return DemoRuns(runs, connections, sent)


# -- the report -------------------------------------------------------------------------
def _kernel_defaults() -> tuple[int, int] | None:
    try:
        with open("/proc/sys/net/ipv4/tcp_rmem") as rmem, open("/proc/sys/net/ipv4/tcp_wmem") as wmem:
            return int(rmem.read().split()[1]), int(wmem.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def demo_report(settings: DemoSettings, measured: DemoRuns, wall_s: float, compared: InMemory | None = None) -> bytes:
    """Return the report of what the demo measured, in ``settings.params.format`` (text or json).

    ``compared``: the same plan in memory (``transport.in_memory``), run here
    if not given.  Raises ``ValueError`` if ``measured`` lacks a run.
    """
    sockets = Sockets(
        sndbuf_asked=settings.sndbuf, rcvbuf_asked=settings.rcvbuf, recv_chunk=RECV_CHUNK,
        connections={name: measured.connections[name] for name in CONNECTIONS},
        sent_when_noticed=measured.sent_when_noticed, kernel_defaults=_kernel_defaults(),
        answer_bytes=sum(map(len, measured.runs["baseline"].frames[0])),
        in_memory=compared or in_memory(settings.params), wall_s=round(wall_s, 1))
    return render_report(assemble(settings.params, measured.runs, transport="sockets", sockets=sockets))
