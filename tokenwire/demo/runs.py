"""``tokenwire demo``: the full answer over real loopback sockets, then the report measured over them.

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

import argparse
import http.client
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from .core.clock import RealClock, ms_to_ns
from .core.pipeline import ConnectionRecord, RunResult, RunSpec, merge_stats
from .core.sse import Decoder
from .core.stream import Stream, TraceEntry
from .live_config import ConnectionLog, LiveConfig
from .params import MAX_BUFFER, MAX_READER_MS, ReportParams
from .plan import DEMO_PARAMS, demo_estimate_s, plan_demo
from .registry import Registry
from .render import render_report
from .report import assemble
from .server import LiveServer, make_server
from .sockets import MAX_BUFFER_BYTES, buffer_sizes, recv_queue_bytes, send_queue_bytes, shrink_buffers
from .transport import InMemory, KernelFigures, Sockets, in_memory

__all__ = ["DEMO_RCVBUF", "DEMO_SNDBUF", "DemoRuns", "DemoSettings", "KernelFigures", "cli_main", "demo_report",
           "read_stream", "run_demo"]

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
# The connections, in the order they run (the progress lines count them).
CONNECTIONS = ("baseline", "block", "drop-newest", "cut", "resume")
# How often the server's loop looks for a shutdown; the demo waits up to this long at the end.
SHUTDOWN_POLL_S = 0.05


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


def _kernel(seen: _Client, log: ConnectionLog) -> KernelFigures:
    def top(values: list[int]) -> int:
        return max(values, default=0)
    return KernelFigures(
        sndbuf=seen.sndbuf, rcvbuf=seen.rcvbuf, send_queue_max=top(seen.send_queue),
        recv_queue_max=top(seen.recv_queue), in_kernel_bytes_max=top(seen.in_kernel_bytes),
        in_kernel_tokens_max=top(seen.in_kernel_tokens), reader_held_max=top(seen.reader_held),
        channel_depth_max=top(seen.channel_depth), samples=len(seen.arrivals),
        channel_high_water=log.stats.high_water, channel_capacity=log.stats.capacity)


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


def _single(server: LiveServer, settings: DemoSettings, spec: RunSpec,
            progress: Progress | None) -> tuple[RunResult, KernelFigures]:
    stream_id = _create(server, settings.query(spec))
    start = server.clock.now()
    seen = _connect(server, settings, stream_id, spec, spec.stream_id, progress)
    log = _wait_logged(server, stream_id, 1)
    stream = server.registry.get(stream_id).stream
    return _result(spec, stream, [seen], [log], start, [None]), _kernel(seen, log)


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
    return both, _kernel(first, first_log), _kernel(second, second_log), first_log.tokens_sent


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
    server = make_server(registry=Registry(), config=config)
    thread = threading.Thread(target=server.serve_forever, args=(SHUTDOWN_POLL_S,), name="tokenwire-demo-server",
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


# -- the command --------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    d = DEMO_PARAMS
    parser = argparse.ArgumentParser(prog="tokenwire demo", description=(
        "Stream the full answer over five connections on real loopback sockets (baseline, block, drop-newest, "
        "a cut, the resume) with a slow reader, then print the report measured over sockets."))
    parser.add_argument("--format", choices=("text", "json"), default="text", help="report format (default text)")
    parser.add_argument("--reader-ms", type=float, default=d.reader_ms,
                        help=f"the slow reader's time per token (default {d.reader_ms:g})")
    parser.add_argument("--buffer", type=int, default=d.buffer,
                        help=f"channel slots for the slow runs (default {d.buffer})")
    parser.add_argument("--cut-after", type=int, default=d.cut_after,
                        help=f"tokens the reader takes before it hangs up (default {d.cut_after})")
    parser.add_argument("--sndbuf", type=int, default=DEMO_SNDBUF,
                        help=f"SO_SNDBUF asked for on the server's stream sockets, 0 for the kernel's "
                             f"(default {DEMO_SNDBUF})")
    parser.add_argument("--rcvbuf", type=int, default=DEMO_RCVBUF,
                        help=f"SO_RCVBUF asked for on the reader's sockets, 0 for the kernel's (default {DEMO_RCVBUF})")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def _settings(args: argparse.Namespace) -> DemoSettings:
    if not 0 <= args.reader_ms <= MAX_READER_MS:
        raise ValueError(f"--reader-ms must be from 0 to {MAX_READER_MS:g}, got {args.reader_ms!r}")
    if not 1 <= args.buffer <= MAX_BUFFER:
        raise ValueError(f"--buffer must be from 1 to {MAX_BUFFER}, got {args.buffer!r}")
    if not 1 <= args.cut_after < DEMO_PARAMS.tokens:
        raise ValueError(f"--cut-after must be from 1 to {DEMO_PARAMS.tokens - 1}, got {args.cut_after!r}")
    for name in ("sndbuf", "rcvbuf"):
        if not 0 <= getattr(args, name) <= MAX_BUFFER_BYTES:
            raise ValueError(f"--{name} must be 0 (the kernel's) or a number of bytes up to {MAX_BUFFER_BYTES}, "
                             f"got {getattr(args, name)!r}")
    # The report's parameters hold times to 6 decimals, as its query strings do.
    params = replace(DEMO_PARAMS, format=args.format, reader_ms=round(args.reader_ms, 6), buffer=args.buffer,
                     cut_after=args.cut_after)
    return DemoSettings(params, sndbuf=args.sndbuf or None, rcvbuf=args.rcvbuf or None)


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
        index = CONNECTIONS.index(self.current or CONNECTIONS[0]) + 1
        return (f"[{index}/{len(CONNECTIONS)}] {self.current:<12} {self.count:>3} tokens read"
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
    params = settings.params
    if progress is not None:
        print(f"tokenwire demo: {params.tokens} tokens, {len(CONNECTIONS)} connections over 127.0.0.1, a "
              f"{params.reader_ms:g} ms reader, about {demo_estimate_s(params):g} s; progress on stderr",
              file=sys.stderr, flush=True)
    started = time.monotonic()
    measured = run_demo(settings, progress)
    if progress is not None:
        progress.finish()
    sys.stdout.write(demo_report(settings, measured, time.monotonic() - started).decode())
    sys.stdout.flush()
    return 0
