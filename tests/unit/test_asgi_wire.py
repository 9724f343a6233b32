"""``AsgiWire`` in this process against fake ASGI ``send``s: a write the server takes at once, one it makes
wait (a slow reader), one it never finishes (the write timeout), and the peer leaving.  (The heartbeat is
the writer's, the same for both servers: ``tests/test_endpoints.py``.)  Every wait is bounded by
``asyncio.wait_for``."""

from __future__ import annotations

import asyncio
from typing import Any

from tokenwire.asgi.wire import AsgiWire, eager_send

Message = dict[str, Any]


class FakeServer:
    """A ``send`` that records bodies; while ``gate`` is set, each body waits for it (a paused transport).

    ``held`` is set once a body waits at the gate, ``listening`` once someone waits in ``receive``.
    """

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.gate: asyncio.Future[None] | None = None
        self.held, self.listening, self.disconnect = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body" and self.gate is not None:
            self.held.set()
            await self.gate
        if message["type"] == "http.response.body":
            self.bodies.append(message["body"])

    async def receive(self) -> Message:
        self.listening.set()
        await self.disconnect.wait()
        return {"type": "http.disconnect"}

    async def open_gate_once_held(self) -> None:
        """A slow reader: the transport resumes once a body has had to wait for it."""
        await self.held.wait()
        assert self.gate is not None
        self.gate.set_result(None)

    async def leave_once_listened_to(self) -> None:
        """The peer leaves once the response listens for it."""
        await self.listening.wait()
        self.disconnect.set()


async def _respond(wire: AsgiWire, server: FakeServer, frames: list[bytes], results: list[bool | None],
                   gone: list[str]) -> None:
    def start(w: AsgiWire) -> None:
        def step(index: int) -> None:
            if index == len(frames):
                w.end()
                return
            now = w.send(frames[index], lambda ok: (results.append(ok), step(index + 1)))
            if now is not None:
                results.append(now)
                asyncio.get_running_loop().call_soon(step, index + 1)
        asyncio.get_running_loop().call_soon(step, 0)
    wire.on_gone = lambda: gone.append(wire.failure or "")
    await wire.respond([], server.receive, start)


def _run(eager: bool, gate: bool, frames: list[bytes]) -> tuple[FakeServer, list[bool | None], AsgiWire]:
    async def main() -> tuple[FakeServer, list[bool | None], AsgiWire]:
        server, results = FakeServer(), []
        wire = AsgiWire(server.send, asyncio.get_running_loop(), write_timeout_s=5, eager=eager)
        if gate:
            server.gate = asyncio.get_running_loop().create_future()
            opening = asyncio.ensure_future(server.open_gate_once_held())
        await asyncio.wait_for(_respond(wire, server, frames, results, []), 5)
        if gate:
            assert opening.done() and server.held.is_set()      # a body did wait for the gate
        return server, results, wire
    return asyncio.run(main())


def test_frames_go_out_in_order_whether_written_at_once_or_by_the_task() -> None:
    frames = [f"id: {i}\n\n".encode() for i in range(20)]
    for eager in (True, False):
        for gate in (False, True):
            server, results, wire = _run(eager, gate, frames)
            assert server.bodies == [*frames, b""], (eager, gate)       # then the end of the response
            assert results == [True] * 20 and wire.frames_sent == 20 and wire.failure is None


def test_a_reader_that_takes_nothing_is_dropped_after_the_write_timeout() -> None:
    async def main() -> tuple[list[bool | None], list[str], AsgiWire]:
        server, results, gone = FakeServer(), [], []
        server.gate = asyncio.get_running_loop().create_future()      # never opens
        wire = AsgiWire(server.send, asyncio.get_running_loop(), write_timeout_s=0.1)
        await asyncio.wait_for(_respond(wire, server, [b"data: x\n\n"], results, gone), 5)
        return results, gone, wire
    results, gone, wire = asyncio.run(main())
    assert results == [False]
    assert gone == ["write timeout: nothing taken for 0.1 s"] and wire.failure == gone[0]


def test_a_disconnect_lets_go_at_once() -> None:
    async def main() -> tuple[FakeServer, list[str]]:
        server, gone = FakeServer(), []
        wire = AsgiWire(server.send, asyncio.get_running_loop(), write_timeout_s=5)
        wire.on_gone = lambda: gone.append("gone")
        leaving = asyncio.ensure_future(server.leave_once_listened_to())
        await asyncio.wait_for(wire.respond([], server.receive, lambda w: None), 5)
        assert leaving.done()
        return server, gone
    server, gone = asyncio.run(main())
    assert server.bodies == []                  # no end of response: the peer left
    assert gone == ["gone"]


def test_only_a_servers_own_send_is_stepped_by_hand() -> None:
    assert not eager_send(FakeServer().send)

    async def plain(message: Message) -> None:
        pass
    assert not eager_send(plain)


def test_a_held_frame_goes_out_at_the_ticks_end_and_a_second_in_the_turn_waits_behind_it() -> None:
    """A frame sent in a tick (``realtime.held``) is taken at once and counted, and written when the tick's calls
    are done; the same wire's next frame in the turn writes the held one first (here the server makes it wait,
    a slow reader), then waits behind it: its writer is told once its own frame is taken."""
    from tokenwire.realtime.held import HeldWrites

    frames = [f"id: {i}\n\n".encode() for i in range(2)]

    async def main() -> tuple[FakeServer, list[object], AsgiWire]:
        loop, server, said = asyncio.get_running_loop(), FakeServer(), []
        writes = HeldWrites(loop)
        wire = AsgiWire(server.send, loop, write_timeout_s=5, eager=True, writes=writes)
        server.gate = loop.create_future()

        def start(w: AsgiWire) -> None:
            def tick() -> None:
                writes.holding()
                said.append(w.send(frames[0], said.append))
                said.append(list(server.bodies))                # nothing written while the tick's calls run
                said.append(w.send(frames[1], lambda ok: (said.append(("resumed", list(server.bodies), ok)),
                                                          w.end())))
                writes.release()
                loop.call_soon(server.gate.set_result, None)    # type: ignore[union-attr]
            loop.call_soon(tick)
        await asyncio.wait_for(wire.respond([], server.receive, start), 5)
        return server, said, wire
    server, said, wire = asyncio.run(main())
    assert said == [True, [], None, ("resumed", frames, True)], said
    assert server.bodies == [*frames, b""]
    assert wire.bytes_sent == sum(map(len, frames)) and wire.frames_sent == 2 and wire.failure is None
