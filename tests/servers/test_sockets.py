"""The live server's socket wire (``tokenwire.live.sockets``) on a real socket pair: it counts the token frames it
sent and what the peer has not read, and reports a peer that is gone; shrinking a socket's buffers is validated and
read back.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from tokenwire.core.effects import TokenItem
from tokenwire.core.frames import token_frame
from tokenwire.live.sockets import TransportWire, buffer_sizes, recv_queue_bytes, shrink_buffers


class _Pausing(asyncio.Protocol):
    """A connection that tells its wire when the transport pauses."""

    wire: TransportWire | None = None

    def pause_writing(self) -> None:
        assert self.wire is not None
        self.wire.pause()


def test_the_wire_counts_token_frames_and_reports_a_gone_peer() -> None:
    class Flow(_Pausing):
        def resume_writing(self) -> None:
            assert self.wire is not None
            self.wire.resume()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.wire is not None:
                self.wire.lost(exc)

    async def scenario() -> None:
        left, right = socket.socketpair()
        loop = asyncio.get_running_loop()
        transport, flow = await loop.create_connection(Flow, sock=left)
        wire = flow.wire = TransportWire(transport, loop, write_timeout_s=1.0, sample=True)
        frames = [token_frame(TokenItem(i, "x")) for i in range(3)]
        assert all(wire.send(frame, lambda ok: None) is True for frame in frames)
        assert wire.snapshot() == (sum(map(len, frames)), 3)
        assert wire.tokens_beyond(len(frames[0])) == 2 and wire.tokens_beyond(wire.bytes_sent) == 0
        assert recv_queue_bytes(right) == wire.bytes_sent
        start = wire.bytes_sent                  # three more written together, as a replay is: each counted
        assert wire.send(b"".join(frames), lambda ok: None) is True
        assert wire.snapshot() == (2 * sum(map(len, frames)), 6)
        assert [wire.tokens_beyond(start + len(frames[0]) * k) for k in range(4)] == [3, 2, 1, 0]
        right.close()
        results: list[bool | None] = []
        for _ in range(50):                  # the reset arrives after a write or two; nothing but a failed
                                             # write tells it has: write again, a bounded number of times
            got = wire.send(frames[0], results.append)
            if got is None:
                await asyncio.sleep(0.05)
            else:
                results.append(got)
            if results and results[-1] is False:
                break
            await asyncio.sleep(0.01)
        assert results[-1] is False and wire.failure is not None
        transport.close()
        await asyncio.sleep(0)               # the close runs on the loop's next turn

    asyncio.run(scenario())


def test_buffer_shrinking_is_validated_and_read_back() -> None:
    with socket.socket() as sock:
        shrink_buffers(sock, sndbuf=4096, rcvbuf=4096)
        sndbuf, rcvbuf = buffer_sizes(sock)
        assert sndbuf >= 4096 and rcvbuf >= 4096
        with pytest.raises(ValueError, match="rcvbuf must be a positive int of bytes, got 0"):
            shrink_buffers(sock, rcvbuf=0)
    with pytest.raises(ValueError, match="write_timeout_s must be a positive number"):
        TransportWire(None, None, write_timeout_s=0)  # type: ignore[arg-type]


def test_a_ticks_writes_go_out_once_its_calls_are_done_in_order_and_before_a_close() -> None:
    """Writes made inside a tick of the driver's timers are held until the tick's calls are done, then written in
    the order they were made; a wire that ends inside the tick writes what is held before its connection closes;
    a write the kernel does not take whole pauses its connection, and the wire's next send waits."""
    from tokenwire.core.clock import RealClock
    from tokenwire.realtime.timers import TICK_NS, Timers

    async def scenario() -> None:
        loop, clock = asyncio.get_running_loop(), RealClock()
        timers: Timers[int] = Timers(loop, clock.now, precise=False)
        pairs = [socket.socketpair() for _ in range(4)]
        wires = []
        for left, _ in pairs:
            transport, flow = await loop.create_connection(_Pausing, sock=left)
            wire = flow.wire = TransportWire(transport, loop, write_timeout_s=1.0, writes=timers.writes)
            wire.on_end = transport.close
            wires.append(wire)
        shrink_buffers(pairs[3][0], sndbuf=4096)
        seen: list[int] = []
        big = b"x" * (1 << 20)                                  # more than the kernel takes at once
        answered: list[bool | None] = []

        def call(i: int) -> None:
            if i == 3:
                answered.append(wires[3].send(big, lambda ok: None))
                return
            assert wires[i].send(token_frame(TokenItem(i, str(i))), lambda ok: None) is True
            seen.append(sum(recv_queue_bytes(right) for _, right in pairs))   # nothing written during the tick
            if i == 2:
                wires[0].end()                                  # its frame goes out first, then the close
        due = clock.now() + 3 * TICK_NS
        for i in range(4):
            timers.at(due, call, i)
        while len(answered) < 1:
            await asyncio.sleep(0.01)
        assert seen == [0, 0, 0], seen
        assert answered == [True] and wires[3].paused               # paused by the write, at the tick's end
        assert wires[3].send(b"more", lambda ok: None) is None     # so the next send waits for the drain
        pairs[0][1].setblocking(True)
        got = b""
        while chunk := pairs[0][1].recv(4096):                     # to the close: its frame, whole
            got += chunk
        assert got == token_frame(TokenItem(0, "0"))
        assert [recv_queue_bytes(pairs[i][1]) for i in (1, 2)] == [len(token_frame(TokenItem(i, str(i))))
                                                                   for i in (1, 2)]
        for wire in wires[1:]:
            wire.transport.abort()
        for _, right in pairs:
            right.close()
        await asyncio.sleep(0)

    asyncio.run(scenario())


def test_writes_outside_a_tick_are_held_to_the_end_of_the_loop_turn_and_a_precise_drivers_are_not() -> None:
    """A write made anywhere else (a Redis round's replies, a task's token) is held until the callbacks ready in
    its turn have run; the writes of a driver without a loop to hold them on go out at once."""
    from tokenwire.realtime.held import HeldWrites

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        pairs = [socket.socketpair() for _ in range(2)]
        writes = HeldWrites(loop)
        transports = [(await loop.create_connection(asyncio.Protocol, sock=left))[0] for left, _ in pairs]
        wires = [TransportWire(transport, loop, write_timeout_s=1.0, writes=writes) for transport in transports]
        frame = token_frame(TokenItem(0, "x"))
        seen: list[int] = []
        done = loop.create_future()

        def queued() -> list[int]:
            return [recv_queue_bytes(right) for _, right in pairs]

        def first() -> None:
            wires[0].send(frame, lambda ok: None)
            seen.extend(queued())

        def second() -> None:                               # ready in the same turn: held with the first
            wires[1].send(frame, lambda ok: None)
            seen.extend(queued())
            loop.call_soon(lambda: done.set_result(queued()))      # the next turn
        loop.call_soon(first)
        loop.call_soon(second)
        assert await done == [len(frame)] * 2 and seen == [0, 0, 0, 0], seen
        at_once = TransportWire(transports[0], loop, write_timeout_s=1.0, writes=HeldWrites(None))
        at_once.send(frame, lambda ok: None)
        assert recv_queue_bytes(pairs[0][1]) == 2 * len(frame)
        for transport in transports:
            transport.abort()
        for _, right in pairs:
            right.close()
        await asyncio.sleep(0)

    asyncio.run(scenario())


def test_a_wire_that_sends_again_in_one_turn_meets_its_slow_readers_backpressure_after_a_frame() -> None:
    """A replay to a reader that reads nothing sends frame after frame in one turn: the second writes the first
    and itself at once, so the connection pauses then and the writer waits, as unheld (not 64 frames on)."""
    from tokenwire.realtime.held import HeldWrites

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        left, right = socket.socketpair()
        shrink_buffers(left, sndbuf=4096)
        transport, flow = await loop.create_connection(_Pausing, sock=left)
        wire = flow.wire = TransportWire(transport, loop, write_timeout_s=1.0, writes=HeldWrites(loop))
        frame = b"x" * 4096
        taken = 0
        for _ in range(64):                                 # one turn: nothing yields to the loop
            answer = wire.send(frame, lambda ok: None)
            if answer is not True:
                break
            taken += 1
        assert answer is None and taken <= 2, taken
        assert transport.get_write_buffer_size() <= 2 * len(frame)
        transport.abort()
        right.close()
        await asyncio.sleep(0)

    asyncio.run(scenario())
