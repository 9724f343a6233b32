"""The ASGI wire: what a ``Send`` effect writes to when the reader is behind an ASGI server.

How this works: an ASGI ``send`` is a coroutine, and a process stepped by
the ``LoopDriver`` cannot await.  So ``AsgiWire.send`` (the ``LoopWire``
method) starts the coroutine and steps it once by hand: a server that takes
the frame at once (uvicorn does, unless the client is slow) finishes it in
that step, and the writer goes on without a trip through the event loop.
Otherwise the half-run coroutine is handed to the request's own task, which
``respond`` keeps (``_pump``) for the life of the response: it finishes the write (waiting,
as the server's flow control says, for a slow reader) and then resumes the
writer with True.  So a slow reader holds its writer, and a ``block``
stream's producer with it: the backpressure reaches the model.

Stepping a coroutine outside any task is only safe for a ``send`` that
never asks which task it runs in; ``eager`` says whether this one is (a
server's own ``send``: ``eager_send``).  Middleware can wrap ``send`` in
task-bound machinery (anyio cancel scopes), so for any other ``send`` every
frame is written by the request's task, started there.

The peer is gone when the server says ``http.disconnect`` (a task of the
response listens for it), when ``send`` raises, or when one frame has not
been taken for ``write_timeout_s`` (a reader that stopped reading: under
uvicorn its connection is aborted, under another server the request task
is cancelled, which makes the server close the connection).  Each answers
the writer False at once and calls ``on_gone``, which lets go of the stream
(``cancel`` or ``detach``, as configured) without waiting for the next
frame.  The heartbeat is the writer's own (the endpoints'): this wire only
writes what it is given.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, cast

from ..core.frames import TOKEN_MARK
from ..realtime.held import HeldWrites, Writable

__all__ = ["AsgiWire", "Receive", "Send", "eager_send"]

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]
# How often, as a share of the write timeout, a stuck frame is looked for:
# a reader that takes nothing is dropped within 1.25 timeouts.
_WATCH_SHARE = 0.25
# The servers whose `send` is a plain method of their connection, safe to step by hand.
_EAGER_MODULES = ("uvicorn.protocols.http.httptools_impl", "uvicorn.protocols.http.h11_impl")
_Write = Coroutine[Any, Any, None]



def eager_send(send: Send) -> bool:
    """True if ``send`` is a server's own (uvicorn's), which can be stepped outside a task."""
    owner = getattr(send, "__self__", None)
    return owner is not None and type(owner).__module__ in _EAGER_MODULES


def _abort(send: Send) -> None:
    """Close a reader that takes nothing at once: uvicorn's connection is reset, its unsent megabytes dropped.

    (A plain close would leave the kernel sending them to a reader that
    takes nothing, for as long as TCP keeps trying.)  Any other server gets
    the response task cancelled, and closes the connection as it closes one
    whose app failed mid-response.
    """
    if not eager_send(send):
        return
    transport = getattr(send.__self__, "transport", None)  # type: ignore[attr-defined]
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # close() sends RST
    except (AttributeError, OSError):
        pass                                   # not a TCP socket: an ordinary abort
    transport.abort()


def _body(frame: bytes) -> dict[str, Any]:
    return {"type": "http.response.body", "body": frame, "more_body": True}


class AsgiWire:
    """A ``LoopWire`` over an ASGI response: frames are written at once when they can be, else by ``respond``'s task.

    ``failure`` names why the peer was declared gone (None while it is not);
    ``bytes_sent``/``frames_sent``/``tokens_sent`` count what ``send`` took;
    ``on_gone`` is called once when the peer is declared gone.
    """

    def __init__(self, send: Send, loop: asyncio.AbstractEventLoop, *, write_timeout_s: float,
                 eager: bool | None = None, writes: HeldWrites | None = None) -> None:
        if not write_timeout_s > 0:
            raise ValueError(f"write_timeout_s must be a positive number of seconds, got {write_timeout_s!r}")
        self._send, self.loop = send, loop
        self.write_timeout_s = write_timeout_s
        self.eager = eager_send(send) if eager is None else eager
        # An eager send is a server's coroutine method: ``send`` steps what it returns by hand.
        self._eager = cast(Callable[[dict[str, Any]], _Write], send)
        self.failure: str | None = None
        self.bytes_sent = self.frames_sent = self.tokens_sent = 0
        self._writes = writes if writes is not None else HeldWrites()   # a turn's frames, held (``realtime.held``)
        self._frame: bytes | None = None               # a frame for the task to write
        self._backlog: list[bytes] = []                # held frames (counted) for the task to write first
        self._held_in: list[tuple[Writable, bytes]] | None = None     # the hold this wire's last frame went on
        self._started: tuple[_Write, Any, bytes | None] | None = None   # begun by hand: coroutine, yielded, frame
        self._resume: Callable[[bool], None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._busy = True                              # the task is writing (or not yet waiting)
        self._ended = self._timed_out = False
        self._since: float | None = None               # loop time the write in progress began
        self._task: asyncio.Task[Any] | None = None
        self._watcher: asyncio.TimerHandle | None = None
        self.on_gone: Callable[[], None] = lambda: None

    # -- the LoopWire side (called by the driver) ---------------------------------
    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None:
        """Write ``frame``: True if the server took it now, False if the peer is gone, None: ``resume`` comes later.

        A caught-up reader's every token comes here, so the eager write is
        written out in this method: the server's coroutine started and
        stepped once (a server that takes the frame at once finishes it)."""
        if self.failure is not None:
            return False
        if self.eager and not self._busy:
            held = self._writes.hold_for(self._held_in)     # (a frame of this wire held already goes out now)
            if self._started is None and not self._backlog:
                if held is not None:                        # written with the turn's others (``write``)
                    held.append((self, frame))
                    self._held_in = held
                    return self._sent(frame)
                done = self._begin(frame, frame)
                if done is not None:
                    return self._sent(frame) if done else False
                self._resume = resume
                self._poke()
                return None
        self._frame, self._resume = frame, resume
        self._poke()
        return None

    def _begin(self, frame: bytes, counts: bytes | None) -> bool | None:
        """Start the server's write of ``frame`` and step it once: True if it finished, False if it failed (the
        peer is gone), None if it waits, begun (``_started``, for the task; ``counts``: what to count once it
        is done, None for a held frame, counted already)."""
        write = self._eager(_body(frame))
        try:
            waits_on = write.send(None)
        except StopIteration:
            return True
        except (OSError, RuntimeError) as exc:
            return self._failed(exc)
        self._started, self._since = (write, waits_on, counts), self.loop.time()
        return None

    def is_closing(self) -> bool:
        return self.failure is not None

    def write(self, frame: bytes) -> None:
        """Write a held ``frame`` (counted, and its writer told it was taken): stepped at once as ``send`` does,
        else finished by the response's task, before any frame sent after it."""
        if self._started is not None or self._backlog or self._busy:
            self._backlog.append(frame)
            self._poke()
        elif self._begin(frame, None) is None:
            self._poke()

    def _failed(self, exc: BaseException) -> bool:
        """A send raised ``exc``: the peer is taken for gone (False, what ``send`` answers then)."""
        self.lost(f"send failed: {type(exc).__name__}: {exc}")
        return False

    def _sent(self, frame: bytes) -> bool:
        """The server took ``frame``: counted, unless the peer was declared gone meanwhile (False)."""
        if self.failure is not None:
            return False
        self.bytes_sent += len(frame)
        self.frames_sent += 1
        self.tokens_sent += frame.count(TOKEN_MARK)     # several when written together (a replay)
        return True

    def snapshot(self) -> tuple[int, int]:
        """Return ``(bytes the server took, token frames sent)``."""
        return self.bytes_sent, self.tokens_sent

    def end(self) -> None:
        """The writer has finished: the response ends once the last frame is written."""
        self._ended = True
        self._writes.release(done=False)        # what is held goes out before the response ends
        self._poke()

    def lost(self, why: str) -> None:
        """The peer is gone (``why``): a waiting writer learns it now, and the stream is let go."""
        if self.failure is not None:
            return
        self.failure = why
        self._frame = None
        self._backlog.clear()
        resume, self._resume = self._resume, None
        self._poke()
        self.on_gone()
        if resume is not None:
            resume(False)

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    # -- the response's task -----------------------------------------------------------
    async def respond(self, headers: list[tuple[bytes, bytes]], receive: Receive,
                      start: Callable[[AsgiWire], None]) -> None:
        """Send the 200 with ``headers``, call ``start(self)`` (it spawns the writer), write its frames until it ends.

        Completes the response unless the peer went away.  If the task is
        cancelled meanwhile, the peer is treated as gone.
        """
        self._task = asyncio.current_task()
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
            await asyncio.sleep(0)      # our own watch cancelled it: let an aborted transport say it is lost
            return
        except BaseException as exc:    # a send that failed some other way (middleware): the writer is told
            self._failed(exc)
            raise
        finally:
            listener.cancel()
            if self._watcher is not None:
                self._watcher.cancel()
        if self.failure is None:
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump(self) -> None:
        while True:
            if self._started is not None:
                held = self._started[2] is None
                ok = await self._finish(*self._started)
                if held:
                    continue                        # a held frame's writer was told already
            elif self._backlog:
                frames = b"".join(self._backlog)
                self._backlog.clear()
                await self._write(frames, counted=True)
                continue
            elif self._frame is not None:
                frame, self._frame = self._frame, None
                ok = await self._write(frame)
            elif self._ended or self.failure is not None:
                return
            else:
                self._busy, self._wake = False, self.loop.create_future()
                await self._wake
                self._busy, self._wake = True, None
                continue
            resume, self._resume = self._resume, None
            if resume is not None:
                resume(ok)

    async def _write(self, frame: bytes, *, counted: bool = False) -> bool:
        """Write ``frame`` through the server's ``send``; True once it took it (``counted``: counted already)."""
        self._since = self.loop.time()
        try:
            await self._send(_body(frame))
        except (OSError, RuntimeError) as exc:       # servers that raise on a closed connection
            return self._failed(exc)
        finally:
            self._since = None
        return self.failure is None if counted else self._sent(frame)

    async def _finish(self, write: _Write, waits_on: Any, frame: bytes | None) -> bool:
        """Run a write begun by hand to its end in this task (it was waiting on ``waits_on``; ``frame`` None: a
        held frame, counted already)."""
        self._started = None
        try:
            while True:
                if waits_on is not None:
                    waits_on._asyncio_future_blocking = False     # as a Task does with what it is handed
                try:
                    await (waits_on if waits_on is not None else asyncio.sleep(0))
                except asyncio.CancelledError as exc:
                    waits_on = write.throw(exc)
                    continue
                waits_on = write.send(None)
        except StopIteration:
            return self.failure is None if frame is None else self._sent(frame)
        except (OSError, RuntimeError) as exc:
            return self._failed(exc)
        finally:
            self._since = None

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
            _abort(self._send)
            if self._task is not None:
                self._task.cancel()
            return
        self._watcher = self.loop.call_later(self.write_timeout_s * _WATCH_SHARE, self._watch)
