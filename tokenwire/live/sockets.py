"""The socket wire: what a ``Send`` effect writes to when the reader is a real TCP peer.

How this works: ``TransportWire.send`` writes a frame to an asyncio
transport and answers when the kernel has taken it, without blocking the
loop: at once, or later through flow control (``pause_writing`` /
``resume_writing``).  It answers False, never raises, when the peer is
gone: a reset, a broken pipe, or a peer that stopped reading for longer than
the write timeout (the kernel's send buffer is full and stays full).  The
writer then disconnects from its stream (which cancels the producer if its
policy says so); ``end`` closes the connection once the writer is done.

The wire also keeps what the kernel-buffer report needs: the byte offset at
which each token frame ends, so that "bytes sent but not yet read" can be
turned into "tokens sitting in kernel buffers".  ``send_queue_bytes`` and
``recv_queue_bytes`` read Linux's ``TIOCOUTQ`` (bytes in a socket's send
queue, not yet acknowledged by the peer) and ``FIONREAD`` (bytes received
and not yet read by the application); on other systems they return None.
``shrink_buffers`` sets ``SO_SNDBUF``/``SO_RCVBUF``; Linux doubles the value
asked for (bookkeeping overhead) and enforces a floor, so the effective size
is read back with ``getsockopt`` and reported, never assumed.  ``listening``
is the one way a server here binds (``tokenwire serve``'s ``LiveServer``,
``tokenwire proxy``'s uvicorn): IPv4, or IPv6 alone for a host with a ':'.
"""

from __future__ import annotations

import array
import asyncio
import bisect
import fcntl
import socket
import termios
from collections.abc import Callable
from typing import Protocol

from ..core.frames import TOKEN_MARK
from ..endpoints.config import DEFAULT_WRITE_TIMEOUT_S
from ..realtime.held import HeldWrites, Writable

__all__ = [
    "MAX_BUFFER_BYTES",
    "TransportWire",
    "buffer_sizes",
    "listening",
    "recv_queue_bytes",
    "send_queue_bytes",
    "shrink_buffers",
]


class SocketLike(Protocol):
    """A socket, or the socket-like object an asyncio transport hands out."""

    def fileno(self) -> int: ...
    def getsockopt(self, level: int, option: int) -> int: ...
    def setsockopt(self, level: int, option: int, value: int) -> None: ...


# setsockopt takes a C int; Linux caps a buffer at net.core.wmem_max/rmem_max
# anyway, so a larger request is a mistake, refused with a message.
MAX_BUFFER_BYTES = 2**31 - 1


def listening(host: str, port: int, backlog: int) -> socket.socket:
    """A TCP socket listening on ``host``:``port`` (0: any free port), ``SO_REUSEADDR`` set; raises ``OSError``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=backlog)


def _ioctl_int(sock: SocketLike, request: int) -> int | None:
    buf = array.array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), request, buf, True)
    except (OSError, ValueError):    # closed socket (fileno -1) or an unsupported request
        return None
    return int(buf[0])


def send_queue_bytes(sock: SocketLike) -> int | None:
    """Return the bytes in ``sock``'s kernel send queue (``TIOCOUTQ``), or None if unreadable."""
    return _ioctl_int(sock, termios.TIOCOUTQ)


def recv_queue_bytes(sock: SocketLike) -> int | None:
    """Return the bytes in ``sock``'s kernel receive queue (``FIONREAD``), or None if unreadable."""
    return _ioctl_int(sock, termios.FIONREAD)


def shrink_buffers(sock: SocketLike, *, sndbuf: int | None = None, rcvbuf: int | None = None) -> None:
    """Ask the kernel for smaller socket buffers; raises ``ValueError`` for a size below 1.

    Set ``rcvbuf`` before ``connect`` (the window scale is fixed at the
    handshake).  Read what was granted with ``buffer_sizes``.
    """
    for name, value, option in (("sndbuf", sndbuf, socket.SO_SNDBUF), ("rcvbuf", rcvbuf, socket.SO_RCVBUF)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BUFFER_BYTES:
            raise ValueError(f"{name} must be a positive int of bytes, got {value!r}; at most {MAX_BUFFER_BYTES}")
        sock.setsockopt(socket.SOL_SOCKET, option, value)


def buffer_sizes(sock: SocketLike) -> tuple[int, int]:
    """Return the effective ``(SO_SNDBUF, SO_RCVBUF)`` of ``sock`` in bytes, as the kernel reports them."""
    return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))





def _nothing() -> None:
    pass


def _token_ends(frames: bytes, start: int) -> list[int]:
    """Where each token frame in ``frames`` (several, written at offset ``start``) ends in the stream."""
    ends, at = [], frames.find(TOKEN_MARK)
    while at >= 0:
        end = frames.index(b"\n\n", at + len(TOKEN_MARK) - 1) + 2
        ends.append(start + end)
        at = frames.find(TOKEN_MARK, end)
    return ends


class TransportWire:
    """A ``LoopWire`` over an asyncio transport: a ``Send`` completes once the kernel has taken the frame.

    The transport's write buffer limit is zero, so a write the kernel does
    not take whole pauses the connection's protocol, which calls ``pause``;
    the writer then waits (``send`` returns None) until ``resume`` (drained),
    ``lost`` (the peer is gone) or ``write_timeout_s`` without progress (the
    connection is aborted).  Only this connection's writer waits: the loop
    goes on.  ``bytes_sent``/``frames_sent`` count what was written;
    ``failure`` names why the peer was declared gone (None while it is not);
    ``send_queue_high`` is the deepest ``TIOCOUTQ`` seen after a send when
    ``sample`` is on.  ``writes``: the driver's, which holds a turn's writes
    until its tokens are made (``realtime.held``; not when ``sample`` is on,
    which reads the kernel's queue after each write).
    """

    def __init__(self, transport: asyncio.WriteTransport, loop: asyncio.AbstractEventLoop, *,
                 write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S, sample: bool = False,
                 writes: HeldWrites | None = None) -> None:
        if not write_timeout_s > 0:
            raise ValueError(f"write_timeout_s must be a positive number of seconds, got {write_timeout_s!r}")
        self.transport, self.loop = transport, loop
        self.sock = transport.get_extra_info("socket")
        self.write_timeout_s = write_timeout_s
        self.sample = sample
        self._writes = writes if writes is not None and not sample else HeldWrites()
        self._held_in: list[tuple[Writable, bytes]] | None = None     # the hold this wire's last write went on
        self.bytes_sent = 0
        self.frames_sent = 0
        self.tokens_sent = 0
        self.failure: str | None = None
        self.send_queue_high = 0
        self.paused = False
        self._token_ends: list[int] = []      # byte offset where each token frame ends
        self._waiter: Callable[[bool], None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.on_end: Callable[[], None] = _nothing           # what ``end`` does: the connection closes
        transport.set_write_buffer_limits(high=0, low=0)
        self.paused = transport.get_write_buffer_size() > 0     # what a pause during the call above said

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None:
        """Write ``frame``; True if the kernel took it, False if the peer is gone, None: ``resume`` is called later."""
        transport = self.transport
        if self.failure is not None or transport.is_closing():
            self.failure = self.failure or "connection closed"
            return False
        held = self._writes.hold_for(self._held_in)
        if held is None:
            transport.write(frame)
        else:
            held.append((transport, frame))
            self._held_in = held
        self.bytes_sent += len(frame)
        self.frames_sent += 1
        marks = frame.count(TOKEN_MARK)     # one token frame, several written together (a replay), or none
        self.tokens_sent += marks
        if self.sample:
            if marks:                       # where each token frame ends, for the demo's kernel figures
                start = self.bytes_sent - len(frame)
                self._token_ends.extend(_token_ends(frame, start) if marks > 1 else (self.bytes_sent,))
            self._sample()
        if not self.paused:
            return True
        self._waiter = resume
        self._timer = self.loop.call_later(self.write_timeout_s, self._timed_out)
        return None

    def flush(self) -> None:
        """Write what is held now (the connection is closing)."""
        self._writes.release(done=False)

    def end(self) -> None:
        """The writer has ended: the connection closes once what was written has drained.  Called once:
        ``on_end`` is dropped after it runs (a closure over this wire would keep it and its connection in a
        cycle only the garbage collector breaks, with the request's body in it)."""
        on_end, self.on_end = self.on_end, _nothing
        self.flush()                        # what is held goes out before the close
        on_end()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._wake(True)

    def lost(self, exc: BaseException | None) -> None:
        """The connection is gone: a waiting writer learns it now."""
        if self.failure is None:
            self.failure = "connection closed" if exc is None else f"{type(exc).__name__}: {exc}"
        self._wake(False)

    def _timed_out(self) -> None:
        self._timer = None
        self.failure = f"write timeout: nothing taken for {self.write_timeout_s:g} s"
        self.transport.abort()
        self._wake(False)

    def _wake(self, ok: bool) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter(ok)

    def _sample(self) -> None:
        queued = send_queue_bytes(self.sock)
        if queued is not None and queued > self.send_queue_high:
            self.send_queue_high = queued

    def tokens_beyond(self, received_bytes: int) -> int:
        """Return how many token frames were sent whole but end past ``received_bytes`` of the stream."""
        ends = list(self._token_ends)
        return len(ends) - bisect.bisect_right(ends, received_bytes)

    def snapshot(self) -> tuple[int, int]:
        """Return ``(bytes handed to the kernel, token frames sent)``."""
        try:
            buffered = self.transport.get_write_buffer_size()
        except (AttributeError, RuntimeError):
            buffered = 0
        return self.bytes_sent - buffered, self.tokens_sent
