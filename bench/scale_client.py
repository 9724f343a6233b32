"""The client of item 5: N concurrent SSE streams over loopback, one asyncio process.

How this works: ``python -m bench.scale_client PORT PATH N TOKENS TIMEOUT_S``
opens N connections (in batches, so the listen backlog is not the thing
measured), sends one HTTP/1.1 GET on each and reads the response with a
raw ``asyncio.Protocol``: the status line and headers, then the body,
de-chunked when the server chunks it (uvicorn does; tokenwire's server
closes the connection instead), fed to tokenwire's ``Decoder``.  Every
token event's arrival is stamped with ``perf_counter_ns`` and its id
checked against the next expected index.  The same client reads both
servers.  It prints one JSON object: streams complete and contiguous, the
pooled inter-token gaps' percentiles, errors, and its own CPU time (if the
client itself ran out of CPU, the gaps say more about it than the server).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from typing import Any

from tokenwire.core.metrics import percentile
from tokenwire.core.sse import Decoder

BATCH = 100           # connections opened at once
BATCH_PAUSE_S = 0.02  # between batches: 5,000 connections a second


def raise_nofile() -> int:
    """Raise the soft file-descriptor limit to the hard one; returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class Stream(asyncio.Protocol):
    """One SSE response: status, headers, (chunked) body, events."""

    def __init__(self, request: bytes, tokens: int, finished: asyncio.Future[None]) -> None:
        self.request, self.tokens, self.finished = request, tokens, finished
        self.head = b""
        self.status = 0
        self.chunked: bool | None = None
        self.pending = b""        # chunked framing not yet parsed
        self.chunk_left = 0       # bytes left in the current chunk, its closing CRLF included
        self.decoder = Decoder()
        self.arrivals: list[int] = []
        self.next_id = 0
        self.contiguous = True
        self.done = False
        self.error: str | None = None
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
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
            if event.event == "token":
                self.arrivals.append(now)
                if event.id != str(self.next_id):
                    self.contiguous = False
                self.next_id += 1
            elif event.event == "done":
                self.done = True      # an EventSource would be closed by the page here
                assert self.transport is not None
                self.transport.close()

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

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self.error = f"{type(exc).__name__}: {exc}"
        if not self.finished.done():
            self.finished.set_result(None)

    @property
    def complete(self) -> bool:
        return self.status == 200 and self.done and self.contiguous and self.next_id == self.tokens


async def _main(port: int, path: str, n: int, tokens: int, timeout_s: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
               "Cache-Control: no-store\r\n\r\n").encode()
    streams: list[Stream] = []
    waits: list[asyncio.Future[None]] = []
    errors: dict[str, int] = {}
    for start in range(0, n, BATCH):
        batch = []
        for _ in range(start, min(n, start + BATCH)):
            finished: asyncio.Future[None] = loop.create_future()
            proto = Stream(request, tokens, finished)
            streams.append(proto)
            waits.append(finished)
            batch.append(loop.create_connection(lambda p=proto: p, "127.0.0.1", port))  # type: ignore[misc]
        for proto, result in zip(streams[start:], await asyncio.gather(*batch, return_exceptions=True)):
            if isinstance(result, BaseException):
                proto.error = f"connect: {type(result).__name__}: {result}"
                proto.finished.set_result(None)
        await asyncio.sleep(BATCH_PAUSE_S)
    _, pending = await asyncio.wait(waits, timeout=timeout_s)
    for proto in streams:
        if proto.error:
            key = proto.error.split(":")[0] + ": " + proto.error.split(":")[1].strip() if ":" in proto.error else proto.error
            errors[key] = errors.get(key, 0) + 1
        elif proto.status != 200:
            errors[f"HTTP {proto.status}"] = errors.get(f"HTTP {proto.status}", 0) + 1
    gaps = [(b - a) / 1e6 for s in streams for a, b in zip(s.arrivals, s.arrivals[1:])]
    return {
        "n": n, "tokens": tokens, "complete": sum(s.complete for s in streams), "contiguous": sum(s.contiguous for s in streams),
        "tokens_received": sum(len(s.arrivals) for s in streams), "timed_out": len(pending), "errors": errors,
        "itl_ms": {str(q): percentile(gaps, q) for q in (50, 95, 99)} if gaps else None,
    }


def main(argv: list[str]) -> int:
    port, path, n, tokens, timeout_s = int(argv[0]), argv[1], int(argv[2]), int(argv[3]), float(argv[4])
    raise_nofile()
    start, cpu0 = time.perf_counter(), os.times()
    result = asyncio.run(_main(port, path, n, tokens, timeout_s))
    cpu1 = os.times()
    result["client_cpu_s"] = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    result["client_wall_s"] = time.perf_counter() - start
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
