"""The live server's parts on their own: the registry, the socket wire, request parsing, ``tokenwire serve``."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys

import pytest
from support.requirements import ROOT

from tokenwire.core.effects import TokenItem
from tokenwire.core.frames import token_frame
from tokenwire.core.pipeline import RunSpec
from tokenwire.core.tokenlog import MemoryTokenLog, UnknownStream
from tokenwire.endpoints.params import RequestError, resume_cursor, spec_from_query, split_query
from tokenwire.endpoints.registry import STREAM_ID_BYTES, Busy, Registry
from tokenwire.live.sockets import TransportWire, buffer_sizes, recv_queue_bytes, shrink_buffers


# -- registry -----------------------------------------------------------------------------
def test_stream_ids_are_random_url_safe_and_unique() -> None:
    registry = Registry()
    ids = {registry.create(RunSpec(tokens=5)).stream_id for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and set(i) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
               for i in ids)
    assert STREAM_ID_BYTES * 8 >= 128


def test_get_knows_only_made_streams_and_forgets_what_the_log_evicted() -> None:
    now = [0]
    registry = Registry(MemoryTokenLog(lambda: now[0], max_age_ns=1000))
    live = registry.create(RunSpec(tokens=5))
    assert registry.get(live.stream_id) is live
    with pytest.raises(UnknownStream):
        registry.get("nope")
    now[0] = 5000
    registry.log.expire()                                   # type: ignore[attr-defined]
    with pytest.raises(UnknownStream):
        registry.get(live.stream_id)
    assert len(registry) == 0


def test_a_stream_in_the_log_but_not_in_the_registry_is_rebuilt_from_its_meta() -> None:
    log = MemoryTokenLog(lambda: 0)
    made = Registry(log).create(RunSpec(tokens=7, capacity=3, policy="drop-newest"), cut_after=2)  # type: ignore[arg-type]
    joined = Registry(log).get(made.stream_id)          # another registry on the same (shared) log
    assert (joined.stream.total, joined.stream.capacity, joined.stream.policy.value) == (7, 3, "drop-newest")
    assert joined.take_cut(None) is None                # the one-time cut stays with the instance that made it


def test_the_cut_is_used_once() -> None:
    live = Registry().create(RunSpec(tokens=10), cut_after=4)
    assert live.take_cut(None) == 4
    assert live.take_cut(None) is None and live.take_cut(6) is None
    other = Registry().create(RunSpec(tokens=10))
    assert other.take_cut(6) == 6 and other.take_cut(6) is None


def test_the_open_stream_limit_raises_busy_and_frees_its_slot() -> None:
    registry = Registry(max_live=1)
    with registry.connection():
        with pytest.raises(Busy, match="at most 1"):
            with registry.connection():
                pass
    with registry.connection():
        assert registry.live == 1 and registry.peak_live == 1
    assert registry.live == 0
    with pytest.raises(ValueError, match="max_live must be a positive int, got 0"):
        Registry(max_live=0)


# -- request parsing ------------------------------------------------------------------------
def test_live_parameters_are_split_from_the_report_ones() -> None:
    rest, live = split_query("tokens=30&cut_after=5&scenario=block&last_event_id=3")
    assert rest == "tokens=30&scenario=block" and live == {"cut_after": "5", "last_event_id": "3"}
    with pytest.raises(RequestError, match=r"parameter 'cut_after' given more than once \('1' and '2'\); give it once"):
        split_query("cut_after=1&cut_after=2")
    spec, cut = spec_from_query("tokens=30&scenario=drop-newest&buffer=8&cut_after=5")
    assert (spec.tokens, spec.policy.value, spec.capacity, cut) == (30, "drop-newest", 8, 5)
    assert spec_from_query("tokens=30")[1] is None            # the report's default cut is not a live cut
    with pytest.raises(RequestError, match="last_event_id applies to /streams/<id>/events"):
        spec_from_query("last_event_id=3")


@pytest.mark.parametrize(("header", "query", "expected"), [
    (None, None, -1), ("", None, -1), (None, "", -1), ("0", None, 0), ("12", "3", 12), (None, "3", 3),
])
def test_resume_cursor_accepts(header: str | None, query: str | None, expected: int) -> None:
    assert resume_cursor(header, query, total=30, generated=30) == expected


@pytest.mark.parametrize(("header", "message"), [
    ("01", "Last-Event-ID must be a decimal integer without sign or leading zeros (at most 9 digits), got '01'"),
    ("30", "Last-Event-ID '30' is past the end: this stream has ids 0..29"),
    ("20", "Last-Event-ID '20' was never sent: this stream has generated ids 0..19 so far"),
])
def test_resume_cursor_refuses(header: str, message: str) -> None:
    with pytest.raises(RequestError) as error:
        resume_cursor(header, None, total=30, generated=20)
    assert error.value.status == 400 and error.value.message == message


# -- the socket wire ------------------------------------------------------------------------
def test_the_wire_counts_token_frames_and_reports_a_gone_peer() -> None:
    import asyncio

    class Flow(asyncio.Protocol):
        wire: TransportWire | None = None

        def pause_writing(self) -> None:
            assert self.wire is not None
            self.wire.pause()

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


# -- the command ------------------------------------------------------------------------------
def test_tokenwire_serve_prints_its_url_serves_and_stops_on_ctrl_c() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "serve", "--port", "0", "--quiet",
                             "--heartbeat-s", "5"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("tokenwire serving on http://127.0.0.1:"), line
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/stream?tokens=3")
        response = conn.getresponse()
        assert response.status == 200 and b"event: done" in response.read()
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode in (0, 130)


def test_tokenwire_serve_refuses_bad_flags() -> None:
    from tokenwire.live.command import cli_main
    assert cli_main(["--port", "70000"]) == 2
    assert cli_main(["--heartbeat-s", "0"]) == 2
