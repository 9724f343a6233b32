"""The client of item 5: N concurrent SSE streams over loopback, one process, one thread.

How this works: ``python -m bench.scale_client PORT PATH N TOKENS TIMEOUT_S``
opens N non-blocking connections (in batches, so the listen backlog is not
what is measured) on one ``selectors`` loop, sends one HTTP/1.1 GET on each
and reads the response raw: the status line and headers, then the body,
de-chunked when the server chunks it (uvicorn does; tokenwire's server
closes the connection instead), fed to tokenwire's ``Decoder``.  The same
client reads every server.

Each token event is stamped with the time the kernel received the bytes
that completed it (``SO_TIMESTAMPNS``), not the time this process got round
to reading them, so a busy client does not show up as server jitter.  Where
the kernel gives no stamp, the read time is used.  Every id is checked
against the next expected index.  The client closes a stream on its
``done`` event, as a page closes its ``EventSource``.  A PATH of ``/chat?<parameters>``
reads the AI SDK's chat protocol instead: a ``POST /chat`` whose JSON body
carries the parameters (and no messages), each ``text-delta`` chunk a token
(its id is its chunk number, 3 past the token's index), ``finish`` the end.  A PATH of
``/v1/chat/completions?<parameters>`` reads OpenAI's chat chunks: a ``POST`` whose JSON
body carries the parameters (``model`` among them, default ``bench``), one user message and
``"stream": true``, each chunk with ``delta.content`` a token (in order: the chunks have no
ids), ``[DONE]`` the end.  A PATH whose query asks for ``parts`` other than ``text`` (the canned
answer with tools: reasoning, tool calls, usage, finish around the text) counts every entry of the log
as a token: each event but ``open`` and ``done``, whatever its name, its id the next index (TOKENS is
then the answer's entries, ``RunSpec.length``).  It prints one JSON
object: streams complete and contiguous, the pooled inter-token gaps'
percentiles, TTFT (connect to first token) percentiles, errors, and its
own CPU time.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import selectors
import socket
import struct
import sys
import time
from itertools import pairwise
from typing import Any
from urllib.parse import parse_qsl

from tokenwire.core.metrics import percentile
from tokenwire.core.sse import Decoder

BATCH = 100           # connections opened at once
BATCH_PAUSE_S = 0.02  # between batches: 5,000 connections a second
# Linux: SO_TIMESTAMPNS (and SCM_TIMESTAMPNS, its control message) is 35;
# Python's socket module does not export it.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")
ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size)
# The chat protocol: a token's chunk, the end, and the chunks before the first token (start, start-step, text-start).
CHAT_DELTA, CHAT_FINISH, CHAT_PREAMBLE = '{"type":"text-delta"', '{"type":"finish"', 3
# OpenAI's chat chunks: a token's chunk (the role chunk has its role first), and the end.
OPENAI_DELTA, OPENAI_DONE = '"delta":{"content":', "[DONE]"
OPENAI_PATH = "/v1/chat/completions?"


def raise_nofile() -> int:
    """Raise the soft file-descriptor limit to the hard one; returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class Stream:
    """One SSE response: status, headers, (chunked) body, events."""

    def __init__(self, sock: socket.socket, tokens: int, chat: bool = False, openai: bool = False,
                 entries: bool = False) -> None:
        self.sock, self.tokens, self.chat, self.openai, self.entries = sock, tokens, chat, openai, entries
        self.head = b""
        self.status = 0
        self.chunked: bool | None = None
        self.pending = b""        # chunked framing not yet parsed
        self.chunk_left = 0       # bytes left in the current chunk, its closing CRLF included
        self.decoder = Decoder()
        self.arrivals: list[int] = []
        self.started = time.time_ns()      # the kernel's receive stamps are CLOCK_REALTIME too
        self.next_id = 0
        self.contiguous = True
        self.done = False
        self.closed = False
        self.error: str | None = None

    def data_received(self, data: bytes, stamp: int) -> None:
        if self.chunked is None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self.head[:end].decode("latin-1"), self.head[end + 4:]
            self.status = int(head.split(" ", 2)[1])
            self.chunked = "transfer-encoding: chunked" in head.lower()
        body = self._dechunk(data) if self.chunked else data
        for event in self.decoder.feed(body):
            if self.openai:
                if OPENAI_DELTA in event.data:
                    self._token(str(self.next_id), str(self.next_id), stamp)
                elif event.data == OPENAI_DONE:
                    self.done = True
            elif self.chat:
                self._chunk(event.id, event.data, stamp)
            elif event.event == "token" or (self.entries and event.event not in ("open", "done")):
                self._token(event.id, str(self.next_id), stamp)
            elif event.event == "done":
                self.done = True

    def _token(self, got: str, expected: str, stamp: int) -> None:
        self.arrivals.append(stamp)
        if got != expected:
            self.contiguous = False
        self.next_id += 1

    def _chunk(self, got: str, data: str, stamp: int) -> None:
        if data.startswith(CHAT_DELTA):
            self._token(got, str(self.next_id + CHAT_PREAMBLE), stamp)
        elif data.startswith(CHAT_FINISH):
            self.done = True

    def _dechunk(self, data: bytes) -> bytes:
        """Return the body bytes in ``data`` (HTTP/1.1 chunked framing removed)."""
        out = []
        buf = self.pending + data
        pos = 0
        while pos < len(buf):
            if self.chunk_left > 2:            # inside a chunk's data
                piece = buf[pos:pos + self.chunk_left - 2]
                out.append(piece)
                self.chunk_left -= len(piece)
                pos += len(piece)
            elif self.chunk_left:              # the CRLF after a chunk's data
                if len(buf) - pos < self.chunk_left:
                    break
                pos += self.chunk_left
                self.chunk_left = 0
            else:                              # a chunk-size line
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                line = buf[pos:eol].split(b";")[0]
                pos = eol + 2
                size = int(line, 16) if line else 0    # "" ends the trailer after the last chunk
                self.chunk_left = size + 2 if size else 0
        self.pending = buf[pos:]
        return b"".join(out)

    @property
    def complete(self) -> bool:
        return self.status == 200 and self.done and self.contiguous and self.next_id == self.tokens


def _stamp(ancillary: list[tuple[int, int, bytes]]) -> int:
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
            seconds, nanos = _TIMESPEC.unpack_from(payload)
            return int(seconds * 1_000_000_000 + nanos)
    return time.time_ns()   # the kernel's stamps are CLOCK_REALTIME too


class Client:
    def __init__(self, port: int, path: str, tokens: int) -> None:
        self.port, self.tokens = port, tokens
        self.chat = path.startswith("/chat?")
        self.openai = path.startswith(OPENAI_PATH)
        self.entries = dict(parse_qsl(path.partition("?")[2])).get("parts", "text") != "text"
        self.request = _chat_request(path, port, openai=self.openai) if self.chat or self.openai else (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
            "Cache-Control: no-store\r\n\r\n").encode()
        self.sel = selectors.DefaultSelector()
        self.streams: list[Stream] = []
        self.open = 0
        self.stamped = 0

    def connect(self, count: int) -> None:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            stream = Stream(sock, self.tokens, self.chat, self.openai, self.entries)
            self.streams.append(stream)
            code = sock.connect_ex(("127.0.0.1", self.port))
            if code not in (0, errno.EINPROGRESS):
                self._fail(stream, f"connect: {os.strerror(code)}")
                continue
            self.sel.register(sock, selectors.EVENT_WRITE, stream)
            self.open += 1

    def _fail(self, stream: Stream, why: str) -> None:
        stream.error = stream.error or why
        self._close(stream)

    def _close(self, stream: Stream) -> None:
        if stream.closed:
            return
        stream.closed = True
        try:
            self.sel.unregister(stream.sock)
            self.open -= 1
        except (KeyError, ValueError):
            pass
        stream.sock.close()

    def _writable(self, stream: Stream) -> None:
        code = stream.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self._fail(stream, f"connect: {os.strerror(code)}")
            return
        try:
            stream.sock.sendall(self.request)   # a few dozen bytes: the send buffer takes them at once
        except OSError as exc:
            self._fail(stream, f"send: {exc.strerror or exc}")
            return
        self.sel.modify(stream.sock, selectors.EVENT_READ, stream)

    def _readable(self, stream: Stream) -> None:
        try:
            data, ancillary, _, _ = stream.sock.recvmsg(65536, ANCILLARY)
        except BlockingIOError:
            return
        except OSError as exc:
            self._fail(stream, f"recv: {exc.strerror or exc}")
            return
        if not data:
            self._close(stream)
            return
        stream.data_received(data, _stamp(ancillary))
        if stream.done:
            self._close(stream)

    def poll(self, timeout: float) -> None:
        for key, mask in self.sel.select(timeout):
            stream: Stream = key.data
            if mask & selectors.EVENT_WRITE:
                self._writable(stream)
            else:
                self._readable(stream)

    def run(self, n: int, timeout_s: float) -> dict[str, Any]:
        start = time.monotonic()
        while len(self.streams) < n:
            self.connect(min(BATCH, n - len(self.streams)))
            until = time.monotonic() + BATCH_PAUSE_S
            while (left := until - time.monotonic()) > 0:
                self.poll(left)
        deadline = start + timeout_s
        while self.open and time.monotonic() < deadline:
            self.poll(min(1.0, max(0.0, deadline - time.monotonic())))
        timed_out = self.open
        for stream in self.streams:
            self._close(stream)
        return self.summary(n, timed_out)

    def summary(self, n: int, timed_out: int) -> dict[str, Any]:
        errors: dict[str, int] = {}
        for s in self.streams:
            key = s.error or (f"HTTP {s.status}" if s.status not in (0, 200) else None)
            if key:
                errors[key] = errors.get(key, 0) + 1
        gaps = [(b - a) / 1e6 for s in self.streams for a, b in pairwise(s.arrivals)]
        ttfts = [(s.arrivals[0] - s.started) / 1e6 for s in self.streams if s.arrivals]
        return {
            "n": n, "tokens": self.tokens, "counted": "entries" if self.entries else "tokens",
            "complete": sum(s.complete for s in self.streams),
            "contiguous": sum(s.contiguous for s in self.streams),
            "tokens_received": sum(len(s.arrivals) for s in self.streams), "timed_out": timed_out,
            "errors": errors, "itl_ms": {str(q): percentile(gaps, q) for q in (50, 95, 99)} if gaps else None,
            "ttft_ms": {str(q): percentile(ttfts, q) for q in (50, 95)} if ttfts else None,
        }


def _number(value: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def _chat_request(path: str, port: int, openai: bool = False) -> bytes:
    """A ``POST /chat`` (or OpenAI's chat completion) whose JSON body carries ``path``'s query parameters."""
    route, _, query = path.partition("?")
    fields: dict[str, Any] = {"messages": []}
    if openai:
        fields = {"model": "bench", "messages": [{"role": "user", "content": "Say something."}], "stream": True}
    for name, value in parse_qsl(query):
        fields[name] = _number(value)
    body = json.dumps(fields).encode()
    return (f"POST {route} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n\r\n").encode() + body


def main(argv: list[str]) -> int:
    port, path, n, tokens, timeout_s = int(argv[0]), argv[1], int(argv[2]), int(argv[3]), float(argv[4])
    raise_nofile()
    start, cpu0 = time.perf_counter(), os.times()
    result = Client(port, path, tokens).run(n, timeout_s)
    cpu1 = os.times()
    result["client_cpu_s"] = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    result["client_wall_s"] = time.perf_counter() - start
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
