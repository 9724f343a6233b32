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
from .sockets import buffer_sizes, recv_queue_bytes, send_queue_bytes, shrink_buffers

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
    clock, host, port = server.clock, *server.server_address[:2]
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
    host, port = server.server_address[:2]
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
    config = LiveConfig(sndbuf=settings.sndbuf, sample_queues=True, access_log=False)
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
