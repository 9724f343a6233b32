"""``tokenwire demo``: the full answer five times over real loopback sockets, then the report.

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

The five connections: ``baseline`` (a fast reader, block, a 64-slot
buffer), ``block`` and ``drop-newest`` (the slow reader, the small buffer),
``cut`` (the reader hangs up after ``cut_after`` tokens) and ``resume`` (it
reconnects ``retry`` ms later with ``Last-Event-ID`` and completes the
answer).  Each is turned into the core's ``RunResult`` (frames as received,
arrival times, the server's channel statistics and trace, model steps), the
same record the in-memory runs produce, so the report's own builders lay it
out; the socket figures are added next to it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from .core.channel import Policy
from .core.clock import RealClock, ms_to_ns
from .core.metrics import timing_from_arrivals
from .core.model import ANSWER
from .core.pipeline import ClockKind, ConnectionRecord, RunResult, RunSpec, merge_stats
from .core.sse import Decoder
from .core.stream import Ending, Stream, TraceEntry
from .registry import Registry
from .server import ConnectionLog, LiveConfig, LiveServer, make_server
from .sockets import MAX_BUFFER_BYTES, buffer_sizes, recv_queue_bytes, send_queue_bytes, shrink_buffers

__all__ = ["DEMO_RCVBUF", "DEMO_SNDBUF", "KernelFigures", "SocketRun", "cli_main", "read_stream", "run_demo"]

# What the demo asks the kernel for on its stream sockets.  Linux doubles the
# figure for its bookkeeping and enforces a floor (about 4.6 KB for sending,
# 2.3 KB for receiving); asking for 4 KiB each keeps the kernel's queue to a
# few dozen token frames, where autotuning would let it hold the whole
# answer (about 11 KB) several times over.
DEMO_SNDBUF = 4096
DEMO_RCVBUF = 4096
# The reader's own buffer: it never pulls more than this out of the kernel
# at once, so the kernel, not the reader's process, holds what is unread.
RECV_CHUNK = 64
# A response head larger than this is not from our server.
MAX_HEAD_BYTES = 16 * 1024
# No demo connection may hang: far above the slowest (277 tokens x 6 ms).
CONNECTION_TIMEOUT_S = 30.0
DEFAULT_READER_MS = 6.0
DEFAULT_BUFFER = 4
DEFAULT_CUT_AFTER = 18
BASELINE_BUFFER = 64


@dataclass(frozen=True, slots=True)
class KernelFigures:
    """What sat in kernel buffers while the reader read, sampled at every token it took.

    sndbuf/rcvbuf: effective ``SO_SNDBUF`` of the server's socket and
    ``SO_RCVBUF`` of the reader's (as the kernel reports them, after it
    doubled the request); send_queue_max: deepest ``TIOCOUTQ`` on the
    server's socket; recv_queue_max: deepest ``FIONREAD`` on the reader's;
    in_kernel_bytes_max: most bytes the server had handed to the kernel that
    the reader had not yet read; in_kernel_tokens_max: the same in whole
    token frames; reader_held_max: token frames the reader had pulled out of
    the kernel but not yet taken (bounded by ``RECV_CHUNK``);
    channel_depth_max: deepest channel seen at the same instants; samples:
    how many instants.
    """

    sndbuf: int
    rcvbuf: int
    send_queue_max: int
    recv_queue_max: int
    in_kernel_bytes_max: int
    in_kernel_tokens_max: int
    reader_held_max: int
    channel_depth_max: int
    samples: int


@dataclass(slots=True)
class _Client:
    """One connection as the reader saw it (times in ns on the server's clock)."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    frames: list[bytes] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    arrivals: list[int] = field(default_factory=list)
    events: int = 0
    done_at: int | None = None
    stream_id: str = ""
    last_event_id: str = ""
    hung_up: bool = False
    body_bytes: int = 0
    sndbuf: int = 0
    rcvbuf: int = 0
    send_queue: list[int] = field(default_factory=list)
    recv_queue: list[int] = field(default_factory=list)
    in_kernel_bytes: list[int] = field(default_factory=list)
    in_kernel_tokens: list[int] = field(default_factory=list)
    reader_held: list[int] = field(default_factory=list)
    channel_depth: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SocketRun:
    """One named run measured over sockets: the core's ``RunResult`` plus the kernel figures per connection."""

    name: str
    result: RunResult
    kernel: tuple[KernelFigures, ...]
    journal: tuple[ConnectionLog, ...]


# -- the reader -----------------------------------------------------------------
def _read_head(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(RECV_CHUNK)
        if not chunk or len(data) > MAX_HEAD_BYTES:
            raise ConnectionError(f"no complete response head (got {data[:80]!r})")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, rest


def read_stream(server: LiveServer, path: str, *, reader_ms: float, rcvbuf: int | None = None,
                hang_up_after: int | None = None, last_event_id: str | None = None,
                on_token: Callable[[int], None] | None = None) -> _Client:
    """Read one event stream from ``server`` as a slow reader; returns what it saw.

    Takes one token per ``reader_ms``; hangs up (closes the socket with data
    unread, so the kernel resets the connection) after ``hang_up_after``
    tokens.  Raises ``OSError``/``ConnectionError`` if the server misbehaves.
    """
    clock, (host, port) = server.clock, server.address
    seen = _Client()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            shrink_buffers(sock, rcvbuf=rcvbuf)        # before connect: the window scale is set at the handshake
        sock.settimeout(CONNECTION_TIMEOUT_S)
        sock.connect((host, port))
        header = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n"
                     f"{header}Connection: close\r\n\r\n".encode())
        seen.status, seen.headers, rest = _read_head(sock)
        if seen.status == 200:
            _read_body(sock, server, seen, rest, clock, ms_to_ns(reader_ms), hang_up_after, on_token)
    finally:
        sock.close()
    return seen


def _read_body(sock: socket.socket, server: LiveServer, seen: _Client, rest: bytes, clock: RealClock,
               reader_ns: int, hang_up_after: int | None, on_token: Callable[[int], None] | None) -> None:
    decoder, pending, free_at = Decoder(), rest, clock.now()
    seen.rcvbuf = buffer_sizes(sock)[1]
    buffered = b""
    while True:
        chunk = pending or sock.recv(RECV_CHUNK)
        pending = b""
        if not chunk:
            return
        seen.body_bytes += len(chunk)
        buffered += chunk
        *whole, buffered = buffered.split(b"\n\n")
        seen.frames.extend(frame + b"\n\n" for frame in whole)
        events = decoder.feed(chunk)
        for i, event in enumerate(events):
            seen.events += 1
            if event.event == "done":
                seen.done_at = clock.now()
                return
            if event.event == "open":
                seen.stream_id = str(json.loads(event.data)["stream_id"])
            if event.event != "token":
                continue
            clock.sleep_until(free_at)
            now = clock.now()
            free_at = now + reader_ns
            seen.arrivals.append(now)
            seen.ids.append(int(event.id))
            seen.texts.append(event.data)
            seen.last_event_id = event.id
            _sample(sock, server, seen, len(events) - i - 1)
            if on_token is not None:
                on_token(len(seen.ids))
            if hang_up_after is not None and len(seen.ids) >= hang_up_after:
                seen.hung_up = True
                return


def _sample(sock: socket.socket, server: LiveServer, seen: _Client, held: int) -> None:
    """Read every queue at this instant: the server's send queue, ours, the gap in bytes and tokens, the channel."""
    wire = server.wires.get(seen.stream_id)
    if wire is None:
        return
    seen.sndbuf = buffer_sizes(wire.sock)[0] if not seen.sndbuf else seen.sndbuf
    sent, _ = wire.snapshot()
    seen.send_queue.append(send_queue_bytes(wire.sock) or 0)
    seen.recv_queue.append(recv_queue_bytes(sock) or 0)
    seen.in_kernel_bytes.append(max(0, sent - seen.body_bytes))
    seen.in_kernel_tokens.append(wire.tokens_beyond(seen.body_bytes))
    seen.reader_held.append(held)
    channel = server.registry.get(seen.stream_id).stream.channel
    seen.channel_depth.append(len(channel) if channel is not None else 0)


def _kernel(seen: _Client) -> KernelFigures:
    def top(values: list[int]) -> int:
        return max(values, default=0)
    return KernelFigures(
        sndbuf=seen.sndbuf, rcvbuf=seen.rcvbuf, send_queue_max=top(seen.send_queue),
        recv_queue_max=top(seen.recv_queue), in_kernel_bytes_max=top(seen.in_kernel_bytes),
        in_kernel_tokens_max=top(seen.in_kernel_tokens), reader_held_max=top(seen.reader_held),
        channel_depth_max=top(seen.channel_depth), samples=len(seen.arrivals))


# -- the runs -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DemoSettings:
    """What the demo runs: the slow reader's pace, the buffer, the hang-up point, the kernel buffers asked for."""

    reader_ms: float = DEFAULT_READER_MS
    buffer: int = DEFAULT_BUFFER
    cut_after: int = DEFAULT_CUT_AFTER
    sndbuf: int | None = DEMO_SNDBUF
    rcvbuf: int | None = DEMO_RCVBUF
    tokens: int = len(ANSWER)
    producer_ms: float = 0.5
    seed: int = 1

    def spec(self, name: str, policy: Policy, capacity: int, reader_ms: float,
             hang_up_after: int | None = None) -> RunSpec:
        return RunSpec(tokens=self.tokens, policy=policy, capacity=capacity, reader_ms=reader_ms,
                       producer_ms=self.producer_ms, seed=self.seed, hang_up_after=hang_up_after,
                       stream_id=name, clock=ClockKind.REAL)

    def query(self, spec: RunSpec) -> str:
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


def _journal_entry(server: LiveServer, count: int) -> ConnectionLog:
    """Wait (bounded) until the server has logged its ``count``-th connection; returns it."""
    deadline = time.monotonic() + CONNECTION_TIMEOUT_S
    while len(server.journal) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server did not finish connection {count} within {CONNECTION_TIMEOUT_S} s")
        time.sleep(0.001)
    return server.journal[count - 1]


def _connect(server: LiveServer, settings: DemoSettings, stream_id: str, spec: RunSpec, name: str,
             progress: Progress | None, **kwargs: object) -> _Client:
    def tick(n: int) -> None:
        if progress is not None:
            progress(name, n, spec.tokens)
    seen = read_stream(server, f"/streams/{stream_id}/events", reader_ms=spec.reader_ms,
                       rcvbuf=settings.rcvbuf, on_token=tick, **kwargs)  # type: ignore[arg-type]
    if seen.status != 200:
        raise RuntimeError(f"GET /streams/{stream_id}/events answered {seen.status}")
    return seen


def _result(spec: RunSpec, stream: Stream, seens: list[_Client], logs: list[ConnectionLog],
            start: int, generated_before_next: list[int | None]) -> RunResult:
    records = tuple(
        ConnectionRecord(log.cursor + 1, len(seen.ids), seen.last_event_id, log.ending, log.stats, nxt)
        for seen, log, nxt in zip(seens, logs, generated_before_next))
    last = seens[-1]
    end = last.done_at if last.done_at is not None else (last.arrivals[-1] if last.arrivals else start)
    return RunResult(
        spec=spec, frames=tuple(tuple(seen.frames) for seen in seens), connections=records,
        arrivals_ns=tuple(t - start for seen in seens for t in seen.arrivals),
        ids=tuple(i for seen in seens for i in seen.ids), texts=tuple(t for seen in seens for t in seen.texts),
        events_read=sum(seen.events for seen in seens), stats=merge_stats([log.stats for log in logs]),
        steps=dict(stream.model.steps), wall_ns=end - start,
        trace=tuple(TraceEntry(e.t_ns - start, e.index, e.decision, e.depth, e.waited_ns) for e in stream.trace),
    )


def _single(server: LiveServer, settings: DemoSettings, spec: RunSpec, progress: Progress | None) -> SocketRun:
    stream_id = _create(server, settings.query(spec))
    start = server.clock.now()
    seen = _connect(server, settings, stream_id, spec, spec.stream_id, progress)
    log = _journal_entry(server, len(server.journal) + 1) if not _logged(server, stream_id, 1) else \
        _entries(server, stream_id)[0]
    stream = server.registry.get(stream_id).stream
    return SocketRun(spec.stream_id, _result(spec, stream, [seen], [log], start, [None]), (_kernel(seen),), (log,))


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
                    progress: Progress | None) -> tuple[SocketRun, SocketRun]:
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
    cut = SocketRun("cut", both, (_kernel(first),), (first_log,))
    return cut, SocketRun("resume", both, (_kernel(first), _kernel(second)), (first_log, second_log))


def run_demo(settings: DemoSettings | None = None, progress: Progress | None = None) -> list[SocketRun]:
    """Run the five connections over loopback; returns ``baseline``, ``block``, ``drop-newest``, ``cut``, ``resume``.

    Raises ``OSError`` if loopback cannot be bound, ``RuntimeError`` or
    ``TimeoutError`` if the server misbehaves (a bug).
    """
    settings = settings or DemoSettings()
    # With buffers this small a very slow reader reopens the TCP window only
    # every few seconds, so the demo waits as long as any connection may take.
    config = LiveConfig(sndbuf=settings.sndbuf, sample_queues=True, access_log=False,
                        write_timeout_s=CONNECTION_TIMEOUT_S)
    server = make_server(registry=Registry(), config=config)
    thread = threading.Thread(target=server.serve_forever, name="tokenwire-demo-server", daemon=True)
    thread.start()
    try:
        slow = settings.reader_ms
        runs = [
            _single(server, settings, settings.spec("baseline", Policy.BLOCK, BASELINE_BUFFER, 0.0), progress),
            _single(server, settings, settings.spec("block", Policy.BLOCK, settings.buffer, slow), progress),
            _single(server, settings, settings.spec("drop-newest", Policy.DROP_NEWEST, settings.buffer, slow),
                    progress),
        ]
        runs.extend(_cut_and_resume(server, settings, settings.spec(
            "resume", Policy.BLOCK, settings.buffer, slow, hang_up_after=settings.cut_after), progress))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(CONNECTION_TIMEOUT_S)
    return runs


# -- the report -------------------------------------------------------------------------
# The report's own section builders and text helpers lay the socket runs out,
# so a figure here is computed and rounded exactly as on the page.  They are
# module-private in tokenwire.report / tokenwire.render; a public
# ``assemble(params, runs, transport=...)`` there would replace this adapter.
from . import render as _render  # noqa: E402
from . import report as _report  # noqa: E402

RULE = "-" * _render.WIDTH


@dataclass(frozen=True, slots=True)
class InMemory:
    """The same parameters run in memory on the virtual clock, where the channel is the only queue."""

    drop_delivered: int
    block_wall_ms: float
    generated_at_reconnect: int


@dataclass(frozen=True, slots=True)
class DemoReport:
    """The demo's figures: the page's sections from the socket runs, plus the kernel's buffers."""

    settings: DemoSettings
    wire: _report.Wire
    timing: _report.Timing
    rows: tuple[_report.PolicyRow, ...]
    resume: _report.Resume
    kernel: tuple[tuple[str, KernelFigures, int, int], ...]    # connection, figures, channel high water, capacity
    cut_sent: int                                             # token frames the server had sent when the reader left
    in_memory: InMemory
    defaults: tuple[int, int] | None                          # the kernel's default (rmem, wmem) in bytes
    answer_bytes: int
    wall_s: float


def _kernel_defaults() -> tuple[int, int] | None:
    try:
        with open("/proc/sys/net/ipv4/tcp_rmem") as rmem, open("/proc/sys/net/ipv4/tcp_wmem") as wmem:
            return int(rmem.read().split()[1]), int(wmem.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _in_memory(settings: DemoSettings) -> InMemory:
    from .core.pipeline import run
    virtual = {"tokens": settings.tokens, "capacity": settings.buffer, "reader_ms": settings.reader_ms,
               "producer_ms": settings.producer_ms, "seed": settings.seed}
    drop = run(RunSpec(policy=Policy.DROP_NEWEST, **virtual))  # type: ignore[arg-type]
    block = run(RunSpec(policy=Policy.BLOCK, **virtual))  # type: ignore[arg-type]
    cut = run(RunSpec(policy=Policy.BLOCK, hang_up_after=settings.cut_after, **virtual))  # type: ignore[arg-type]
    at_reconnect = cut.connections[0].generated_before_next
    return InMemory(len(drop.ids), round(block.wall_ns / 1e6, 1),
                    at_reconnect if at_reconnect is not None else settings.tokens)


def build_demo_report(settings: DemoSettings, runs: list[SocketRun], wall_s: float) -> DemoReport:
    """Lay the socket runs out as the page's sections; returns the figures."""
    by_name = {run.name: run for run in runs}
    baseline, resume = by_name["baseline"].result, by_name["resume"].result
    kernel = []
    for run in runs:
        if run.name == "resume":
            figures, log = run.kernel[1], run.journal[1]
        else:
            figures, log = run.kernel[0], run.journal[0]
        kernel.append((run.name, figures, log.stats.high_water, log.stats.capacity))
    return DemoReport(
        settings=settings, wire=_report._wire(baseline), timing=_report._timing(baseline),
        rows=tuple(_report._policy_row(by_name[name].result) for name in ("block", "drop-newest")),
        resume=_report._resume(resume, by_name["block"].result.text), kernel=tuple(kernel),
        cut_sent=by_name["cut"].journal[0].tokens_sent, in_memory=_in_memory(settings),
        defaults=_kernel_defaults(), answer_bytes=sum(len(f) for f in baseline.frames[0]), wall_s=round(wall_s, 1))


def _lines(*parts: str) -> str:
    return "\n".join(parts) + "\n"


def _heading(title: str, aside: str = "") -> str:
    return _lines(RULE, _render._spread(title, aside), RULE)


def render_text(r: DemoReport) -> str:
    """Return the demo's report as text: the page's sections, measured over sockets, then the kernel's share."""
    return "".join([_head_text(r), _wire_text(r), _timing_text(r), _buffer_text(r), _resume_text(r),
                    _kernel_text(r), _closing_text(r)])


def _head_text(r: DemoReport) -> str:
    s, hang = r.settings, _render._hang
    return _lines(
        _render._spread("STREAMING, BACKPRESSURE AND RESUME", "measured over loopback sockets"),
        "=" * _render.WIDTH,
        hang(f"{s.tokens} tokens, one SSE frame each", "answer length"),
        hang(f"{s.buffer} slots between the producer and the reader (the fast baseline: {BASELINE_BUFFER})",
             "buffer"),
        hang(f"{_render._num(s.reader_ms)} ms per token, against a producer that needs "
             f"{_render._num(s.producer_ms)} ms", "slow reader"),
        hang("real: every figure below was measured just now, over TCP on 127.0.0.1, by a reader in this "
             "process reading the server's sockets; it changes from one run to the next", "clock"),
        hang(f"five connections in {r.wall_s:g} s: baseline, block, drop-newest, a cut after "
             f"{s.cut_after} tokens, and the resume that completes it", "runs"),
    )


def _wire_text(r: DemoReport) -> str:
    w = r.wire
    out = [_heading("1. WHAT ACTUALLY GOES DOWN THE WIRE", "as the reader's socket received it").rstrip("\n"),
           "the first frames, exactly as bytes, each one closed by a blank line:"]
    for frame in w.shown:
        out += _render._frame_lines(frame)
    if w.skipped:
        out.append("| ...")
    out += ["and the closing frame", *_render._frame_lines(w.closing),
            f"fed back through the project's own parser: {w.frames_read} frames read, {w.token_frames} of them "
            f"tokens{'' if w.round_trip else ' (NOT the tokens that were sent)'}"]
    return _lines(*out)


def _timing_text(r: DemoReport) -> str:
    t, hang = r.timing, _render._hang
    return _heading("2. TIMING", "a fast reader over loopback") + _lines(
        hang(f"{t.ttft_ms:.2f} ms", "time to first token", 35),
        hang(f"{t.total_ms:.2f} ms", "whole answer", 35),
        hang(f"{t.first_token_percent} percent", "share waiting for the first token", 35),
        hang(f"p50 {t.itl_p50_ms:.2f} ms, p95 {t.itl_p95_ms:.2f} ms, worst {t.itl_max_ms:.2f} ms",
             "between tokens", 35),
        hang(f"{t.tokens_per_s} tokens per second", "throughput", 35),
    ) + _render._wrap("times are from the reader's request to each token it took, on the server's clock; "
                      "TTFT includes the TCP connect and the request.")


def _buffer_text(r: DemoReport) -> str:
    s = r.settings
    out = [_heading("3. THE BUFFER UNDER A SLOW READER",
                    f"{s.buffer} slots, {_render._num(s.reader_ms)} ms per token").rstrip("\n"),
           "policy         delivered  dropped  gap runs  high water  producer waited  wall ms", RULE]
    for row in r.rows:
        out.append("%-13s %10s %8d %9d %11s %16s %8.1f" % (
            row.policy, f"{row.delivered} of {row.total}", row.dropped, row.gap_runs,
            f"{row.high_water} of {row.capacity}", f"{row.producer_waited_ms:.1f} ms", row.wall_ms))
    block, drop = r.rows
    prose = (f"block kept all {block.delivered} tokens and took {block.wall_ms:.1f} ms, waiting "
             f"{block.producer_waited_ms:.1f} ms across {block.pauses} pauses.\n"
             f"drop-newest finished in {drop.wall_ms:.1f} ms and lost {drop.dropped} tokens in {drop.gap_runs} runs.\n"
             "drop-oldest and disconnect are not run over sockets by the demo; the page shows them in memory.")
    return _lines(*out) + _render._wrap(prose)


def _resume_text(r: DemoReport) -> str:
    c, hang = r.resume, _render._hang
    stopped = (f"the reader had taken {c.first_tokens}, the server had sent {r.cut_sent} and generated "
               f"{c.generated_at_reconnect} when a failed write told it the reader was gone; it cancelled the "
               f"producer there instead of generating all {c.total} into a dead connection"
               if c.generated_at_reconnect < c.total else
               f"the server had generated all {c.total} tokens before it noticed the reader was gone")
    return _heading("4. DISCONNECT AND RESUME", f"the reader hangs up after {c.first_tokens} tokens") + _lines(
        hang(f"{c.first_tokens} tokens, last event id {c.last_event_id}, completed={c.first_completed}",
             "first connection"),
        hang(stopped, "producer stopped"),
        hang(f"Last-Event-ID: {c.last_event_id}, {c.reconnect_ms - c.hang_up_ms:.0f} ms later (the retry "
             "the open frame set)", "reconnect sends"),
        hang(f"resumed at index {c.resumed_at}, {c.second_tokens} more tokens ({c.replayed} of them replayed "
             f"from the log), completed={c.completed}", "second connection"),
        hang(f"{list(c.ids_head)} ... {list(c.ids_tail)}", "event ids received"),
        hang(str(c.contiguous), f"contiguous 0..{c.total - 1}"),
        hang(", ".join(map(str, c.duplicates)) or "none", "duplicated ids"),
        hang(str(c.text_matches), "text matches a stream that was never interrupted", 50),
        hang(f"{c.generated_total} over both connections" + (
            ", the answer's length: nothing was generated twice" if c.steps_max <= 1 and
            c.generated_total == c.total else ": SOME INDEX WAS GENERATED TWICE"), "model steps"),
    )



def _kernel_text(r: DemoReport) -> str:
    s = r.settings
    first = r.kernel[0][1]
    asked = (f"asked for SO_SNDBUF {s.sndbuf} bytes on the server's sockets and SO_RCVBUF {s.rcvbuf} on the "
             f"reader's; the kernel granted {first.sndbuf} and {first.rcvbuf}" if s.sndbuf and s.rcvbuf else
             f"the kernel's own buffer sizes: SO_SNDBUF {first.sndbuf}, SO_RCVBUF {first.rcvbuf}")
    out = [_heading("5. WHERE THE SLOWNESS WENT", "the kernel's buffers, sampled per token").rstrip("\n"),
           "connection    channel      in kernel, most     server send    reader recv   reader",
           "              high water   tokens     bytes    (TIOCOUTQ)     (FIONREAD)    held", RULE]
    for name, k, high, capacity in r.kernel:
        out.append("%-13s %10s %9d %9d %13d %14d %8d" % (
            name, f"{high} of {capacity}", k.in_kernel_tokens_max, k.in_kernel_bytes_max, k.send_queue_max,
            k.recv_queue_max, k.reader_held_max))
    return _lines(*out) + _render._wrap(
        f"{asked}. The reader recv()s at most {RECV_CHUNK} bytes at a time, so what it has not taken stays in "
        "the kernel; \"in kernel\" is what the server had handed to sendall() and the reader had not yet read, "
        "in bytes and in whole token frames; the two queue columns are the deepest each side's queue was at "
        "the same instants.") + "\n" + _render._wrap(_correction(r))


def _correction(r: DemoReport) -> str:
    block_k = dict((name, k) for name, k, _, _ in r.kernel)["block"]
    block, drop = r.rows
    c, mem = r.resume, r.in_memory
    text = (
        f"What this corrects on the page. The page says the buffer between the producer and the reader has "
        f"{block.capacity} slots and that a slow reader fills it. Over TCP it is not the only queue: while the "
        f"block run's channel held at most {block.high_water} tokens, the kernel held up to "
        f"{block_k.in_kernel_tokens_max} more ({block_k.in_kernel_bytes_max} bytes), and the producer is held "
        f"back only when both are full. So the server feels a slow reader late"
        + (f", and a policy decides less: drop-newest delivered {drop.delivered} of {drop.total} here against "
           f"{mem.drop_delivered} in memory with the same {drop.capacity} slots, because the tokens parked in the "
           f"kernel were not dropped. " if drop.delivered > mem.drop_delivered else
           f"; drop-newest still delivered {drop.delivered} of {drop.total} here against {mem.drop_delivered} in "
           f"memory. ") +
        f"When the "
        f"reader hung up after {c.first_tokens} tokens, the server had already sent {r.cut_sent} and generated "
        f"{c.generated_at_reconnect} (in memory: {mem.generated_at_reconnect}): it only learns a reader is gone "
        f"when a write fails, and everything in flight was generated for nobody. None of it was lost: the log "
        f"kept it and the resume replayed {c.replayed} tokens from there."
    )
    if r.defaults is not None:
        rmem, wmem = r.defaults
        if r.answer_bytes < rmem:
            text += (f"\nThese runs shrank the buffers on purpose. This machine's default receive buffer alone "
                     f"(tcp_rmem {rmem} bytes to start, grown by autotuning; tcp_wmem {wmem} for sending) is "
                     f"larger than the whole {r.answer_bytes}-byte answer, so with the defaults the kernel can "
                     f"take all of it: the server would not feel a reader this slow at all, and block and drop "
                     f"would have nothing to decide. Only a longer stream, or a reader that stops reading, "
                     f"reaches the application's buffer.")
    return text


def _closing_text(r: DemoReport) -> str:
    return RULE + "\n" + _render._wrap(
        "Everything above crossed a real socket: tokenwire serve's handler on 127.0.0.1, one request thread per "
        "connection running the stream's writer, the producer on its own thread, and a reader on raw sockets "
        "decoding with the project's parser. The frames, the channel and the resume are the same code the page "
        "runs in memory.")


# -- JSON -----------------------------------------------------------------------------------
def _row_json(row: _report.PolicyRow) -> dict[str, object]:
    return {"delivered": row.delivered, "total": row.total, "dropped": row.dropped, "gap_runs": row.gap_runs,
            "high_water": row.high_water, "capacity": row.capacity, "producer_waited_ms": row.producer_waited_ms,
            "pauses": row.pauses, "wall_ms": row.wall_ms, "cuts": row.cuts, "reconnects": row.reconnects,
            "lost_runs": [list(run) for run in row.lost]}


def report_json(r: DemoReport) -> dict[str, object]:
    """Return the demo as a JSON-ready dict: the report's keys, plus ``transport``, ``sockets`` and ``wall_s``.

    ``scenario`` and ``detail`` are None (the demo runs no chosen scenario);
    ``buffer`` has the two policies the demo runs over sockets.
    """
    w, t, s = r.wire, r.timing, r.settings
    return {
        "scenario": None, "clock": "real", "transport": "sockets",
        "params": {"tokens": s.tokens, "buffer": s.buffer, "reader_ms": s.reader_ms, "producer_ms": s.producer_ms,
                   "cut_after": s.cut_after, "seed": s.seed},
        "wire": {"first_frames": w.first_frames, "closing_frame": w.closing, "frames_skipped": w.skipped,
                 "frames_read": w.frames_read, "token_frames": w.token_frames, "round_trip": w.round_trip},
        "timing": {"tokens": t.tokens, "ttft_ms": t.ttft_ms, "total_ms": t.total_ms,
                   "first_token_share": t.first_token_share, "itl_p50_ms": t.itl_p50_ms,
                   "itl_p95_ms": t.itl_p95_ms, "itl_max_ms": t.itl_max_ms, "tokens_per_s": t.tokens_per_s},
        "buffer": {row.policy: _row_json(row) for row in r.rows},
        "resume": {**_render._resume_json(r.resume), "sent_when_noticed": r.cut_sent},
        "sockets": {
            "sndbuf_asked": s.sndbuf, "rcvbuf_asked": s.rcvbuf, "recv_chunk": RECV_CHUNK,
            "connections": {name: {**asdict(k), "channel_high_water": high, "channel_capacity": capacity}
                            for name, k, high, capacity in r.kernel},
            "kernel_defaults": None if r.defaults is None else {"tcp_rmem": r.defaults[0], "tcp_wmem": r.defaults[1]},
            "answer_bytes": r.answer_bytes,
            "in_memory": asdict(r.in_memory),
        },
        "detail": None,          # the page's per-scenario trace; the demo has no chosen scenario
        "wall_s": r.wall_s,
    }


# -- the command --------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokenwire demo", description=(
        "Stream the full answer five times over real loopback sockets (baseline, block, drop-newest, a cut, "
        "the resume) with a slow reader, then print the report measured over sockets."))
    parser.add_argument("--format", choices=("text", "json"), default="text", help="report format (default text)")
    parser.add_argument("--reader-ms", type=float, default=DEFAULT_READER_MS,
                        help=f"the slow reader's time per token (default {DEFAULT_READER_MS:g})")
    parser.add_argument("--buffer", type=int, default=DEFAULT_BUFFER,
                        help=f"channel slots for the slow runs (default {DEFAULT_BUFFER})")
    parser.add_argument("--cut-after", type=int, default=DEFAULT_CUT_AFTER,
                        help=f"tokens the reader takes before it hangs up (default {DEFAULT_CUT_AFTER})")
    parser.add_argument("--sndbuf", type=int, default=DEMO_SNDBUF,
                        help=f"SO_SNDBUF asked for on the server's stream sockets, 0 for the kernel's (default {DEMO_SNDBUF})")
    parser.add_argument("--rcvbuf", type=int, default=DEMO_RCVBUF,
                        help=f"SO_RCVBUF asked for on the reader's sockets, 0 for the kernel's (default {DEMO_RCVBUF})")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def _settings(args: argparse.Namespace) -> DemoSettings:
    if not 0 <= args.reader_ms <= 100:
        raise ValueError(f"--reader-ms must be from 0 to 100, got {args.reader_ms!r}")
    if not 1 <= args.buffer <= 64:
        raise ValueError(f"--buffer must be from 1 to 64, got {args.buffer!r}")
    if not 1 <= args.cut_after < len(ANSWER):
        raise ValueError(f"--cut-after must be from 1 to {len(ANSWER) - 1}, got {args.cut_after!r}")
    for name in ("sndbuf", "rcvbuf"):
        if not 0 <= getattr(args, name) <= MAX_BUFFER_BYTES:
            raise ValueError(f"--{name} must be 0 (the kernel's) or a number of bytes up to {MAX_BUFFER_BYTES}, "
                             f"got {getattr(args, name)!r}")
    return DemoSettings(reader_ms=args.reader_ms, buffer=args.buffer, cut_after=args.cut_after,
                        sndbuf=args.sndbuf or None, rcvbuf=args.rcvbuf or None)


class _Progress:
    """One line per connection on stderr, redrawn in place on a terminal."""

    def __init__(self, stream: object) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.current: str | None = None
        self.count = 0
        self.started = time.monotonic()

    def __call__(self, name: str, taken: int, total: int) -> None:
        if name != self.current:
            self.finish()
            self.current, self.count, self.started = name, 0, time.monotonic()
        self.count = taken
        if self.tty and (taken % 10 == 0 or taken == total):
            self._write("\r" + self._line(total), end="")

    def _line(self, total: int) -> str:
        index = ("baseline", "block", "drop-newest", "cut", "resume").index(self.current or "baseline") + 1
        return (f"[{index}/5] {self.current:<12} {self.count:>3} tokens read"
                f"  {time.monotonic() - self.started:5.2f} s")

    def finish(self) -> None:
        if self.current is not None:
            self._write(("\r" if self.tty else "") + self._line(0))
        self.current = None

    def _write(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self.stream, flush=True)  # type: ignore[call-overload]


def cli_main(argv: list[str]) -> int:
    """Run ``tokenwire demo``; returns the exit status (2 for bad usage)."""
    args = _parser().parse_args(argv)
    try:
        settings = _settings(args)
    except ValueError as exc:
        print(f"tokenwire demo: {exc}", file=sys.stderr)
        return 2
    progress = None if args.quiet else _Progress(sys.stderr)
    if progress is not None:
        print(f"tokenwire demo: {settings.tokens} tokens, five connections over 127.0.0.1, a "
              f"{settings.reader_ms:g} ms reader; progress on stderr", file=sys.stderr, flush=True)
    started = time.monotonic()
    runs = run_demo(settings, progress)
    if progress is not None:
        progress.finish()
    report = build_demo_report(settings, runs, time.monotonic() - started)
    if args.format == "json":
        print(json.dumps(report_json(report), indent=2))
    else:
        sys.stdout.write(render_text(report))
    sys.stdout.flush()
    return 0
