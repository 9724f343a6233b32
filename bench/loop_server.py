"""A prototype for item 5's proposal: the core's own processes on one selector loop.

Not part of tokenwire: it exists to measure the design item 5 proposes.
``tokenwire serve`` runs each connection's writer on its own thread and
each producer on another, so every token crosses two threads (a condition
wake, GIL hand-offs, several context switches).  Here the same generator
processes (``Stream.serve`` and the producer it spawns, unchanged) are
stepped by one thread, the way the ``Simulation`` driver steps them on the
virtual clock, but on real time and real sockets:

- ``Sleep``: the process's deadline advances (absolute, so no drift) and it
  waits in a heap until then;
- ``Put``/``Get``: ``Stream.offer``/``take`` (uncontended locks); a full or
  empty channel parks the process on its stream, and every channel
  operation on a stream retries that stream's parked processes;
- ``Send``: a non-blocking ``send``; what the kernel does not take waits in
  the connection's buffer and the writer resumes when a writable event has
  drained it (so a slow reader still blocks its own writer, and only it);
- ``Spawn``: the producer joins the loop.

Only ``GET /stream?<report parameters>`` is served (the route the scale
bench uses), with the same parsing and the same ``Stream`` as the real
server.  Run as ``python -m bench.loop_server PORT``.
"""

from __future__ import annotations

import heapq
import itertools
import secrets
import selectors
import socket
import sys
from collections import deque
from typing import Any

from tokenwire.core.channel import Outcome, Taken
from tokenwire.core.clock import RealClock
from tokenwire.core.effects import TIMEOUT, Get, Put, Send, Sleep, Spawn
from tokenwire.core.stream import Stream
from tokenwire.core.tokenlog import MemoryTokenLog
from tokenwire.live.registry import new_stream
from tokenwire.live.server import spec_from_query

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-store\r\n"
        b"X-Accel-Buffering: no\r\nConnection: close\r\n\r\n")
MAX_STREAMS = 1 << 20


class Proc:
    __slots__ = ("gen", "conn", "deadline", "parked_at")

    def __init__(self, gen: Any, conn: Conn | None, now: int) -> None:
        self.gen, self.conn, self.deadline, self.parked_at = gen, conn, now, -1


class Conn:
    __slots__ = ("sock", "inbuf", "out", "writer")

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.inbuf, self.out = sock, b"", bytearray()
        self.writer: Proc | None = None   # the connection's writer process, once the request is read


class Loop:
    def __init__(self, port: int) -> None:
        self.clock = RealClock()
        self.log = MemoryTokenLog(self.clock.now, max_streams=MAX_STREAMS)
        self.sel = selectors.DefaultSelector()
        self.listener = socket.create_server(("127.0.0.1", port), backlog=4096)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.heap: list[tuple[int, int, Proc]] = []
        self.seq = itertools.count()
        self.ready: deque[tuple[Proc, object]] = deque()
        self.parked: dict[int, list[tuple[Proc, Any]]] = {}

    # -- processes ---------------------------------------------------------
    def start(self, gen: Any, conn: Conn | None) -> Proc:
        proc = Proc(gen, conn, self.clock.now())
        self.ready.append((proc, None))
        return proc

    def step(self, proc: Proc, value: object) -> None:
        try:
            effect = proc.gen.send(value)
        except StopIteration:
            if proc.conn is not None:
                self.close(proc.conn)
            return
        self.perform(proc, effect)

    def perform(self, proc: Proc, effect: Any) -> None:
        if isinstance(effect, Sleep):
            proc.deadline += effect.ns
            heapq.heappush(self.heap, (proc.deadline, next(self.seq), proc))
        elif isinstance(effect, Send):
            self.send(proc, effect.frame)
        elif isinstance(effect, Spawn):
            self.start(effect.process, None)
            self.ready.append((proc, None))
        elif not self.attempt(proc, effect):
            proc.parked_at = self.clock.now()
            self.parked.setdefault(id(effect.stream), []).append((proc, effect))

    def attempt(self, proc: Proc, effect: Put | Get) -> bool:
        stream: Stream = effect.stream
        now = self.clock.now()
        if isinstance(effect, Put):
            outcome = stream.offer(effect.item)
            if outcome is Outcome.FULL:
                return False
            waited = now - proc.parked_at if proc.parked_at >= 0 else 0
            if waited and stream.channel is not None and outcome is not Outcome.CLOSED:
                stream.channel.record_pause(waited)
            stream.note(now, effect.item.index, outcome.value, waited)
            result: object = outcome
        else:
            got = stream.take(effect.channel)
            if got is Taken.EMPTY:
                return False
            if not isinstance(got, Taken):
                stream.note(now, got.index, "taken")
            result = got
        if proc.parked_at >= 0:
            proc.deadline = max(proc.deadline, now)
            proc.parked_at = -1
        self.ready.append((proc, result))
        self.wake(stream)
        return True

    def wake(self, stream: Stream) -> None:
        waiting = self.parked.pop(id(stream), None)
        if waiting:
            still = [(p, e) for p, e in waiting if not self.attempt(p, e)]
            if still:
                self.parked.setdefault(id(stream), []).extend(still)

    # -- sockets ----------------------------------------------------------
    def send(self, proc: Proc, frame: bytes) -> None:
        conn = proc.conn
        assert conn is not None
        try:
            sent = conn.sock.send(frame)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.ready.append((proc, False))
            return
        if sent == len(frame):
            self.ready.append((proc, True))
            return
        conn.out += frame[sent:]
        conn.writer = proc
        self.sel.modify(conn.sock, selectors.EVENT_WRITE, conn)

    def writable(self, conn: Conn) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except BlockingIOError:
            return
        except OSError:
            self.sel.modify(conn.sock, selectors.EVENT_READ, conn)
            assert conn.writer is not None
            self.ready.append((conn.writer, False))
            return
        del conn.out[:sent]
        if not conn.out:
            self.sel.modify(conn.sock, selectors.EVENT_READ, conn)
            assert conn.writer is not None
            self.ready.append((conn.writer, True))

    def accept(self) -> None:
        for _ in range(256):
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sel.register(sock, selectors.EVENT_READ, Conn(sock))

    def readable(self, conn: Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if conn.writer is None:
                self.close(conn)
            return
        if conn.writer is not None:
            return  # a client says nothing after its request
        conn.inbuf += data
        if b"\r\n\r\n" not in conn.inbuf:
            return
        target = conn.inbuf.split(b" ", 2)[1].decode("latin-1")
        path, _, query = target.partition("?")
        if path != "/stream":
            conn.sock.send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self.close(conn)
            return
        spec, cut = spec_from_query(query)
        stream = new_stream(secrets.token_urlsafe(16), spec, self.log)
        conn.writer = self.start(stream.serve(-1, stream.new_channel(), cut_after=cut), conn)
        conn.sock.send(HEAD)

    def close(self, conn: Conn) -> None:
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    # -- the loop ---------------------------------------------------------
    def run(self) -> None:
        now = self.clock.now
        while True:
            while self.ready:
                proc, value = self.ready.popleft()
                self.step(proc, value)
            timeout = None
            if self.heap:
                timeout = max(0.0, (self.heap[0][0] - now()) / 1e9)
            for key, mask in self.sel.select(timeout):
                if key.data is None:
                    self.accept()
                elif mask & selectors.EVENT_WRITE:
                    self.writable(key.data)
                else:
                    self.readable(key.data)
            t = now()
            while self.heap and self.heap[0][0] <= t:
                _, _, proc = heapq.heappop(self.heap)
                self.ready.append((proc, None))


if __name__ == "__main__":
    assert TIMEOUT is not None  # Get timeouts (heartbeats) are not needed by the bench
    Loop(int(sys.argv[1])).run()
