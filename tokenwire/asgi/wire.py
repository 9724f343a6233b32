"""The ASGI wire: what a ``Send`` effect writes to when the reader is behind an ASGI server.

How this works: an ASGI ``send`` is a coroutine, and a process stepped by
the ``LoopDriver`` cannot await; so ``AsgiWire.send`` (the ``LoopWire``
method) only hands the frame over and answers "later", and the request's
own task, which ``pump`` keeps busy for the life of the response, awaits
``send`` with it and then resumes the writer with True.  When the server
pauses writing (a slow reader, its transport's flow control), that await
waits, so the writer waits, and a ``block`` stream's producer with it: the
backpressure reaches the model.  Handing over and resuming are plain calls
and one future per idle wait, no task per frame.

The peer is gone when the server says ``http.disconnect`` (a task of the
response listens for it), when ``send`` raises, or when one frame has not
been taken for ``write_timeout_s`` (a reader that stopped reading: the
request task is then cancelled, which makes the server close the
connection).  Each of these answers the writer False at once and calls
``on_gone``, which lets go of the stream (``cancel`` or ``detach``, as
configured) without waiting for the next frame or heartbeat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["AsgiWire", "Receive", "Send"]

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]
# How often, as a share of the write timeout, a stuck frame is looked for:
# a reader that takes nothing is dropped within 1.25 timeouts.
_WATCH_SHARE = 0.25


class AsgiWire:
    """A ``LoopWire`` whose frames an ASGI response's task writes (``pump``).

    ``failure`` names why the peer was declared gone (None while it is not);
    ``bytes_sent``/``frames_sent`` count what ``send`` took.
    """

    def __init__(self, send: Send, loop: asyncio.AbstractEventLoop, *, write_timeout_s: float) -> None:
        if not write_timeout_s > 0:
            raise ValueError(f"write_timeout_s must be a positive number of seconds, got {write_timeout_s!r}")
        self._send, self.loop, self.write_timeout_s = send, loop, write_timeout_s
        self.failure: str | None = None
        self.bytes_sent = self.frames_sent = 0
        self._frame: bytes | None = None
        self._resume: Callable[[bool], None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._ended = False
        self._since: float | None = None          # loop time the frame being written was handed to send
        self._task: asyncio.Task[Any] | None = None
        self._watch_timer: asyncio.TimerHandle | None = None
        self._timed_out = False
        self._on_gone: Callable[[], None] = lambda: None

    # -- the LoopWire side (called by the driver) ---------------------------------
    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None:
        """Hand ``frame`` to the response's task; False if the peer is gone, else None (``resume`` is called)."""
        if self.failure is not None:
            return False
        self._frame, self._resume = frame, resume
        self._poke()
        return None

    def end(self) -> None:
        """The writer has finished: the response ends once the last frame is written."""
        self._ended = True
        self._poke()

    def lost(self, why: str) -> None:
        """The peer is gone (``why``): a waiting writer learns it now, and the stream is let go."""
        if self.failure is not None:
            return
        self.failure = why
        self._frame = None
        resume, self._resume = self._resume, None
        self._poke()
        self._on_gone()
        if resume is not None:
            resume(False)

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    # -- the response's task -----------------------------------------------------------
    async def respond(self, headers: list[tuple[bytes, bytes]], receive: Receive,
                      start: Callable[[AsgiWire], None], on_gone: Callable[[], None]) -> None:
        """Send the 200 with ``headers``, call ``start(self)`` (it spawns the writer), write its frames until it ends.

        Completes the response unless the peer went away.  If the task is
        cancelled meanwhile, the peer is treated as gone.
        """
        self._task = asyncio.current_task()
        self._on_gone = on_gone
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        start(self)
        listener = self.loop.create_task(self._listen(receive))
        self._watch()
        try:
            await self._pump()
        except asyncio.CancelledError:
            self.lost("the response was cancelled")
            if not self._timed_out:
                raise
            return                      # our own watch cancelled it: the server closes the connection
        finally:
            listener.cancel()
            if self._watch_timer is not None:
                self._watch_timer.cancel()
        if self.failure is None:
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump(self) -> None:
        while True:
            frame = self._frame
            if frame is None:
                if self._ended or self.failure is not None:
                    return
                self._wake = self.loop.create_future()
                await self._wake
                self._wake = None
                continue
            self._frame = None
            ok = await self._write(frame)
            resume, self._resume = self._resume, None
            if resume is not None:
                resume(ok)

    async def _write(self, frame: bytes) -> bool:
        self._since = self.loop.time()
        try:
            await self._send({"type": "http.response.body", "body": frame, "more_body": True})
        except (OSError, RuntimeError) as exc:       # servers that raise on a closed connection
            self.lost(f"send failed: {type(exc).__name__}: {exc}")
            return False
        finally:
            self._since = None
        if self.failure is not None:
            return False
        self.bytes_sent += len(frame)
        self.frames_sent += 1
        return True

    async def _listen(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message.get("type") == "http.disconnect":
                self.lost("the client disconnected")
                return

    def _watch(self) -> None:
        since = self._since
        if since is not None and self.loop.time() - since >= self.write_timeout_s:
            self._timed_out = True
            self.lost(f"write timeout: nothing taken for {self.write_timeout_s:g} s")
            if self._task is not None:
                self._task.cancel()
            return
        self._watch_timer = self.loop.call_later(self.write_timeout_s * _WATCH_SHARE, self._watch)
