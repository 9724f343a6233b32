"""An OpenAI-compatible upstream that misbehaves (or answers N tokens), on loopback in a thread; no tests here.

``MisbehavingUpstream()`` answers ``POST /v1/chat/completions`` as the
request's ``model`` says (the rest of the body is not read):

- ``endless``: a role chunk, then ``" e<i>"`` content chunks without a
  ``finish_reason``, one each ``PACE_S``, until its client leaves (or
  ``CAP`` of them: then it closes the connection without ``[DONE]``);
- ``pings``: only ``: ping`` comments, one each ``PACE_S``, until its client
  leaves (or ``CAP`` of them: then it closes);
- ``redirect``: a ``302 Found`` to another host;
- ``html``: a ``200`` of ``text/html``, a login page;
- ``count=N``: as ``endless``, but after ``N`` chunks a ``finish_reason`` and
  ``[DONE]``: an answer that ends.

Each request is a ``Served`` in ``served``: how many chunks it sent, and
``left`` (a ``threading.Event``) once its client closed the connection,
with ``sent_when_left``.  The response is close-delimited (``Connection:
close``), so the client leaving is the socket's EOF.  Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from types import TracebackType

# How often an endless answer sends its next chunk (a fast model: 200 tokens/s).
PACE_S = 0.005
# The most chunks one answer sends before it gives up and closes: 10 s at PACE_S, so a test is bounded even
# against a proxy that relays it all.
CAP = 2000
START_TIMEOUT_S = 30.0

_HTML = b"<!doctype html><html><body><form action=/login>Sign in</form></body></html>"


@dataclass
class Served:
    """One request: its ``model``, the chunks sent, and when its client left."""

    model: str
    sent: int = 0
    sent_when_left: int | None = None
    left: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)


def _chunk(content: str | None = None, finish: str | None = None) -> bytes:
    delta = {"role": "assistant", "content": ""} if content is None else {"content": content}
    body = {"id": "chatcmpl-misbehaving", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": {} if finish else delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


def _head(status: str, kind: str, *extra: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Type: {kind}", "Connection: close", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class MisbehavingUpstream:
    """The upstream (see the module); ``url`` is its OpenAI base URL once entered."""

    def __init__(self) -> None:
        self.served: list[Served] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> MisbehavingUpstream:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(START_TIMEOUT_S)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(START_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_TIMEOUT_S)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            served = Served(str(json.loads(await reader.readexactly(length)).get("model")))
            self.served.append(served)
            await self._answer(served, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _answer(self, served: Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if served.model == "redirect":
            writer.write(_head("302 Found", "text/plain", "Location: http://elsewhere.invalid/v1/chat/completions"))
        elif served.model == "html":
            writer.write(_head("200 OK", "text/html; charset=utf-8") + _HTML)
        else:
            writer.write(_head("200 OK", "text/event-stream"))
            await self._stream(served, reader, writer, b": ping\n\n" if served.model == "pings" else None)
        await writer.drain()
        served.finished.set()

    async def _stream(self, served: Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      ping: bytes | None) -> None:
        watch = asyncio.ensure_future(reader.read(1))      # b"" once the client has closed its side
        if ping is None:
            writer.write(_chunk())
        count = int(served.model.removeprefix("count=")) if served.model.startswith("count=") else CAP
        gone = False
        try:
            while served.sent < count and not watch.done():
                await asyncio.sleep(PACE_S)
                writer.write(ping or _chunk(f" e{served.sent}"))
                await writer.drain()
                served.sent += 1
            gone = watch.done()
            if served.sent == count < CAP:
                writer.write(_chunk(finish="stop") + b"data: [DONE]\n\n")
        except ConnectionError:
            gone = True                                     # it left as this wrote
        finally:
            watch.cancel()
        if gone:
            served.sent_when_left = served.sent
            served.left.set()
