"""The demo's reader: a raw-socket client that reads one event stream slowly and samples every queue.

How this works: ``read_stream`` connects with ``SO_RCVBUF`` shrunk before
``connect``, ``recv``s at most ``RECV_CHUNK`` bytes at a time and takes one
token every ``reader_ms`` (deadline-paced on the server's ``RealClock``).
Each time it takes a token it reads the server socket's send queue
(``TIOCOUTQ``), its own receive queue (``FIONREAD``), the bytes the server
had handed to the kernel and it had not yet read (converted to whole token
frames with the wire's frame offsets), and the channel's depth.
``kernel_figures`` sums one connection's samples for section 5.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from ..core.clock import RealClock, ms_to_ns
from ..core.sse import Decoder
from ..endpoints.config import ConnectionLog
from ..live.server import LiveServer
from ..live.sockets import buffer_sizes, recv_queue_bytes, send_queue_bytes, shrink_buffers
from ..report.transport import KernelFigures

__all__ = ["CONNECTION_TIMEOUT_S", "RECV_CHUNK", "Client", "kernel_figures", "read_stream"]

# The reader's own buffer: it never pulls more than this out of the kernel
# at once, so the kernel, not the reader's process, holds what is unread.
RECV_CHUNK = 64
# A response head larger than this is not from our server.
MAX_HEAD_BYTES = 16 * 1024
# No demo connection may hang: far above the slowest (277 tokens x 6 ms).
CONNECTION_TIMEOUT_S = 30.0


@dataclass(slots=True)
class Client:
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
                on_token: Callable[[int], None] | None = None) -> Client:
    """Read one event stream from ``server`` as a slow reader; returns what it saw.

    Takes one token per ``reader_ms``; hangs up (closes the socket with data
    unread, so the kernel resets the connection) after ``hang_up_after``
    tokens.  Raises ``OSError``/``ConnectionError`` if the server misbehaves.
    """
    clock, (host, port) = server.clock, server.address
    seen = Client()
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


def _read_body(sock: socket.socket, server: LiveServer, seen: Client, rest: bytes, clock: RealClock,
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
                if hang_up_after == 0:          # the connection dies before its first token
                    seen.hung_up = True
                    return
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


def _sample(sock: socket.socket, server: LiveServer, seen: Client, held: int) -> None:
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


def kernel_figures(seen: Client, log: ConnectionLog) -> KernelFigures:
    def top(values: list[int]) -> int:
        return max(values, default=0)
    return KernelFigures(
        sndbuf=seen.sndbuf, rcvbuf=seen.rcvbuf, send_queue_max=top(seen.send_queue),
        recv_queue_max=top(seen.recv_queue), in_kernel_bytes_max=top(seen.in_kernel_bytes),
        in_kernel_tokens_max=top(seen.in_kernel_tokens), reader_held_max=top(seen.reader_held),
        channel_depth_max=top(seen.channel_depth), samples=len(seen.arrivals),
        channel_high_water=log.stats.high_water, channel_capacity=log.stats.capacity)
