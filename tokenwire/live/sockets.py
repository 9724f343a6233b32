"""The socket wire: what a ``Send`` effect writes to when the reader is a real TCP peer.

How this works: ``SocketWire.deliver`` is one ``sendall`` under the socket's
write timeout.  It returns False, never raises, when the peer is gone: a
reset, a broken pipe, or a peer that stopped reading for longer than the
timeout (the kernel's send buffer is full and stays full).  The writer then
disconnects from its stream, which cancels the producer.

The wire also keeps what the kernel-buffer report needs: the byte offset at
which each token frame ends, so that "bytes sent but not yet read" can be
turned into "tokens sitting in kernel buffers".  ``send_queue_bytes`` and
``recv_queue_bytes`` read Linux's ``TIOCOUTQ`` (bytes in a socket's send
queue, not yet acknowledged by the peer) and ``FIONREAD`` (bytes received
and not yet read by the application); on other systems they return None.
``shrink_buffers`` sets ``SO_SNDBUF``/``SO_RCVBUF``; Linux doubles the value
asked for (bookkeeping overhead) and enforces a floor, so the effective size
is read back with ``getsockopt`` and reported, never assumed.
"""

from __future__ import annotations

import array
import bisect
import fcntl
import socket
import termios
import threading

__all__ = [
    "DEFAULT_WRITE_TIMEOUT_S",
    "MAX_BUFFER_BYTES",
    "SocketWire",
    "buffer_sizes",
    "recv_queue_bytes",
    "send_queue_bytes",
    "shrink_buffers",
]

# setsockopt takes a C int; Linux caps a buffer at net.core.wmem_max/rmem_max
# anyway, so a larger request is a mistake, refused with a message.
MAX_BUFFER_BYTES = 2**31 - 1
# A reader that has not taken a single byte for this long is treated as gone
# (a half-open connection, a suspended laptop, a client that stopped
# reading): long enough for a browser tab in the background to catch up,
# short enough that a dead reader does not pin a producer and a thread.
DEFAULT_WRITE_TIMEOUT_S = 10.0


def _ioctl_int(sock: socket.socket, request: int) -> int | None:
    buf = array.array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), request, buf, True)
    except (OSError, ValueError):    # closed socket (fileno -1) or an unsupported request
        return None
    return int(buf[0])


def send_queue_bytes(sock: socket.socket) -> int | None:
    """Return the bytes in ``sock``'s kernel send queue (``TIOCOUTQ``), or None if unreadable."""
    return _ioctl_int(sock, termios.TIOCOUTQ)


def recv_queue_bytes(sock: socket.socket) -> int | None:
    """Return the bytes in ``sock``'s kernel receive queue (``FIONREAD``), or None if unreadable."""
    return _ioctl_int(sock, termios.FIONREAD)


def shrink_buffers(sock: socket.socket, *, sndbuf: int | None = None, rcvbuf: int | None = None) -> None:
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


def buffer_sizes(sock: socket.socket) -> tuple[int, int]:
    """Return the effective ``(SO_SNDBUF, SO_RCVBUF)`` of ``sock`` in bytes, as the kernel reports them."""
    return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))


# How a token frame is told from the others (the field order may change;
# a data line always starts with "data:", so this line cannot be forged).
_TOKEN_LINE = b"event: token\n"


class SocketWire:
    """A ``Wire`` over a connected socket.

    ``bytes_sent``/``frames_sent`` count what ``sendall`` handed to the
    kernel; ``failure`` names why the peer was declared gone (None while it
    is not); ``send_queue_high`` is the deepest ``TIOCOUTQ`` seen right after
    a send when ``sample`` is on.
    """

    def __init__(self, sock: socket.socket, *, write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S,
                 sample: bool = False) -> None:
        if not write_timeout_s > 0:
            raise ValueError(f"write_timeout_s must be a positive number of seconds, got {write_timeout_s!r}")
        self.sock = sock
        self.write_timeout_s = write_timeout_s
        self.sample = sample
        self.bytes_sent = 0
        self.frames_sent = 0
        self.failure: str | None = None
        self.send_queue_high = 0
        self._token_ends: list[int] = []      # byte offset where each token frame ends
        self._lock = threading.Lock()         # the offsets are read by another thread in the demo
        sock.settimeout(write_timeout_s)

    def ready_at(self) -> int:
        # The kernel is the judge of readiness: sendall blocks while the send
        # buffer is full, so the writer never has to wait before trying.
        return 0

    def deliver(self, frame: bytes, now: int) -> bool:
        """Send ``frame`` whole; returns False (and records why) when the peer is gone."""
        if self.failure is not None:
            return False
        try:
            self.sock.sendall(frame)
        except TimeoutError:
            self.failure = f"write timeout: nothing taken for {self.write_timeout_s:g} s"
            return False
        except OSError as exc:   # BrokenPipeError, ConnectionResetError, a closed socket
            self.failure = f"{type(exc).__name__}: {exc.strerror or exc}"
            return False
        with self._lock:
            self.bytes_sent += len(frame)
            self.frames_sent += 1
            if frame.startswith(_TOKEN_LINE) or b"\n" + _TOKEN_LINE in frame:
                self._token_ends.append(self.bytes_sent)
        if self.sample:
            queued = send_queue_bytes(self.sock)
            if queued is not None and queued > self.send_queue_high:
                self.send_queue_high = queued
        return True

    def tokens_beyond(self, received_bytes: int) -> int:
        """Return how many token frames were sent whole but end past ``received_bytes`` of the stream."""
        with self._lock:
            return len(self._token_ends) - bisect.bisect_right(self._token_ends, received_bytes)

    def snapshot(self) -> tuple[int, int]:
        """Return ``(bytes_sent, token frames sent)`` consistently."""
        with self._lock:
            return self.bytes_sent, len(self._token_ends)
