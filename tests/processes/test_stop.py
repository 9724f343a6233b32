"""``POST /streams/<id>/stop``: generation stops wherever it runs, the model's iterator is
closed, every reader ends with the early-stop ``done``, a second stop is harmless, an unknown id is 404, and a
reconnect after a stop gets the ending.  The memory log on both servers (both event loops for ours), and two
processes on one real ``redis-server`` (the stop on B, the reader and the model on A)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from httpx_sse import connect_sse
from support.asgi import Read, read_stream, uvicorn
from support.live import serving, wait_until
from support.redis import running_redis

from tokenwire.core.model import ANSWER

TIMEOUT_S = 20.0


class Reader(threading.Thread):
    """Reads the stream at ``url`` to its end in a thread; ``started`` is set once it has ``after`` tokens."""

    def __init__(self, url: str, after: int) -> None:
        super().__init__(daemon=True)
        self.url, self.after = url, after
        self.started = threading.Event()
        self.read: Read | None = None
        self.ended_at = 0.0

    def run(self) -> None:
        with (httpx.Client(timeout=TIMEOUT_S) as client, connect_sse(client, "GET", self.url) as source):
            read = Read(source.response.status_code)
            for event in source.iter_sse():
                if event.event == "open" and self.after == 0:
                    self.started.set()
                read.events.append(event)
                if len(read.tokens) >= self.after:
                    self.started.set()
        self.ended_at = time.monotonic()
        self.read = read
        self.started.set()

    def result(self) -> Read:
        self.join(TIMEOUT_S)
        assert not self.is_alive(), "the reader did not end"
        assert self.read is not None
        return self.read


@contextmanager
def reading(url: str, after: int) -> Iterator[Reader]:
    reader = Reader(url, after)
    reader.start()
    assert reader.started.wait(TIMEOUT_S), "the reader got no tokens"
    yield reader


def _stopped_ending(read: Read) -> None:
    """``read`` ended with what was logged, each index once, then the early-stop ``done``."""
    assert read.status == 200
    assert read.ids == list(range(len(read.ids)))
    assert read.last.event == "done"
    assert read.last_json()["stopped_early"] is True and read.last_json()["reason"] == "stopped"
    assert read.last_json()["tokens"] == (read.ids[-1] + 1 if read.ids else read.last_json()["tokens"])


def _stop(base: str, stream_id: str) -> httpx.Response:
    return httpx.post(f"{base}/streams/{stream_id}/stop", timeout=TIMEOUT_S)


# -- the memory log: tokenwire serve (both loops) and the ASGI app ----------------------------------------------
def _stop_a_canned_stream(base: str) -> None:
    made = httpx.post(f"{base}/streams?tokens=200&producer_ms=20")
    stream_id = made.json()["stream_id"]
    with reading(base + made.json()["events_url"], after=3) as reader:
        stopped = _stop(base, stream_id)
        read = reader.result()
    assert (stopped.status_code, stopped.json()) == (200, {"stream_id": stream_id, "state": "stopped"})
    _stopped_ending(read)
    assert 3 <= len(read.ids) < 200 and read.text == "".join(ANSWER[:len(read.ids)])
    again = _stop(base, stream_id)                                        # harmless twice
    assert (again.status_code, again.json()) == (200, {"stream_id": stream_id, "state": "stopped"})
    last = read.tokens[-1].id
    resumed = read_stream(f"{base}/streams/{stream_id}/events", headers={"Last-Event-ID": last})
    assert resumed.ids == [] and resumed.last.event == "done"            # the ending, never a 204
    assert resumed.last_json() == {**read.last_json(), "delivered_from": len(read.ids)}
    whole = read_stream(f"{base}/streams/{stream_id}/events")           # a new reader: the same answer
    assert whole.ids == read.ids and whole.last_json() == read.last_json()


def test_serve_stops_a_canned_stream_its_reader_ends_early_and_a_reconnect_gets_the_ending(loop_kind: str) -> None:
    with serving() as server:
        _stop_a_canned_stream(server.url)


def test_the_asgi_app_stops_a_canned_stream_alike() -> None:
    with uvicorn("tokenwire.asgi:app") as server:
        _stop_a_canned_stream(server.url)


def test_stop_refusals_and_a_finished_stream(loop_kind: str) -> None:
    with serving() as server:
        base = server.url
        unknown = _stop(base, "unknownstream")
        assert unknown.status_code == 404
        assert unknown.json()["error"].startswith("unknown stream 'unknownstream'")
        wrong = httpx.get(f"{base}/streams/unknownstream/stop")
        assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
        made = httpx.post(f"{base}/streams?tokens=3&producer_ms=0.1").json()
        assert read_stream(base + made["events_url"]).ids == [0, 1, 2]
        finished = _stop(base, made["stream_id"])                          # it had ended: it stays done
        assert (finished.status_code, finished.json()) == (200, {"stream_id": made["stream_id"], "state": "done"})
        assert httpx.get(base + made["events_url"], headers={"Last-Event-ID": "2"}).status_code == 204
        unread = httpx.post(f"{base}/streams?tokens=5").json()               # stopped before anyone read it
        assert _stop(base, unread["stream_id"]).json()["state"] == "stopped"
        never = read_stream(base + unread["events_url"])
        assert never.ids == [] and never.last_json()["stopped_early"] is True


def test_a_stop_url_with_a_parameter_is_refused_and_stops_nothing(loop_kind: str) -> None:
    # The parameter was ignored and the stream stopped, where every other live URL refuses what it does not take.
    with serving() as server, uvicorn("support.apps.fake_model:app") as app:
        for base in (server.url, app.url + "/canned"):
            made = httpx.post(f"{base}/streams?tokens=5").json()
            for route in ("streams", "chat"):
                refused = httpx.post(f"{base}/{route}/{made['stream_id']}/stop?now=1")
                assert (refused.status_code, refused.json()) == (400, {"error": f"POST /{route}/<id>/stop takes no "
                                                                                "query string, got 'now=1'"})
            assert read_stream(f"{base}/streams/{made['stream_id']}/events").ids == [0, 1, 2, 3, 4]   # not stopped


def _model_stats(base: str, stream_id: str) -> dict[str, object]:
    stats: dict[str, object] = httpx.get(f"{base}/model/{stream_id}").json()
    return stats


@pytest.mark.parametrize("mode", ["ok", "never"])
def test_a_models_stream_stops_and_its_iterator_is_closed(mode: str) -> None:
    with uvicorn("support.apps.fake_model:app") as server:
        base = server.url
        made = httpx.post(f"{base}/tokens/streams?n=1000&delay_ms=20&mode={mode}").json()
        with reading(base + made["events_url"], after=0 if mode == "never" else 3) as reader:
            stopped = httpx.post(f"{base}/tokens/streams/{made['stream_id']}/stop")
            read = reader.result()
        assert (stopped.status_code, stopped.json()["state"]) == (200, "stopped")
        _stopped_ending(read)
        wait_until(lambda: _model_stats(base, made["stream_id"])["closed"], "the model to be closed", TIMEOUT_S)
        stats = _model_stats(base, made["stream_id"])
        assert stats["closed"] is True and stats["finished"] is False and int(stats["steps"]) < 1000  # type: ignore[call-overload]


# -- two processes on one Redis: the stop on B, the reader and the model on A ------------------------------------
def _redis_env(url: str) -> dict[str, str]:
    return {"TOKENWIRE_TEST_LOG": f"{url}?lease_ms=400&block_ms=50"}


@pytest.mark.parametrize("mode", ["ok", "never"])
def test_a_stop_on_another_process_stops_the_model_where_it_runs(mode: str) -> None:
    with running_redis() as redis_server:
        env = _redis_env(redis_server.url)
        with (uvicorn("support.apps.fake_model:app", env=env) as one,
              uvicorn("support.apps.fake_model:app", env=env) as other):
            made = httpx.post(f"{one.url}/tokens/streams?n=1000&delay_ms=20&mode={mode}").json()
            with reading(one.url + made["events_url"], after=0 if mode == "never" else 3) as reader:
                asked = time.monotonic()
                stopped = httpx.post(f"{other.url}/tokens/streams/{made['stream_id']}/stop")
                read = reader.result()
            took = reader.ended_at - asked
            again = httpx.post(f"{other.url}/tokens/streams/{made['stream_id']}/stop")
            wait_until(lambda: _model_stats(one.url, made["stream_id"])["closed"], "the model on A to be closed",
                       TIMEOUT_S)
            stats = _model_stats(one.url, made["stream_id"])
            last = read.tokens[-1].id if read.tokens else None
            resumed = read_stream(other.url + made["events_url"], headers={"Last-Event-ID": last} if last else {})
    assert (stopped.status_code, stopped.json()["state"]) == (200, "stopped")
    assert (again.status_code, again.json()["state"]) == (200, "stopped")
    _stopped_ending(read)
    print(f"mode={mode}: the reader on A ended {took * 1000:.0f} ms after the stop on B, "
          f"{len(read.ids)} tokens, model steps {stats['steps']}")
    assert took < 2.0
    assert stats["closed"] is True and stats["finished"] is False
    assert resumed.ids == [] and resumed.last.event == "done" and resumed.last_json()["stopped_early"] is True
    assert json.loads(resumed.last.data)["tokens"] == len(read.ids)


def test_a_canned_stream_generated_on_one_process_is_stopped_from_the_other() -> None:
    with running_redis() as redis_server:
        env = {"TOKENWIRE_LOG_URL": f"{redis_server.url}?lease_ms=400&block_ms=50"}
        with uvicorn("tokenwire.asgi:app", env=env) as one, uvicorn("tokenwire.asgi:app", env=env) as other:
            made = httpx.post(f"{one.url}/streams?tokens=200&producer_ms=20").json()
            with reading(one.url + made["events_url"], after=3) as reader:      # A's reader: A generates
                stopped = httpx.post(f"{other.url}/streams/{made['stream_id']}/stop")
                read = reader.result()
            resumed = read_stream(other.url + made["events_url"], headers={"Last-Event-ID": read.tokens[-1].id})
            fresh = read_stream(one.url + made["events_url"])
    assert (stopped.status_code, stopped.json()["state"]) == (200, "stopped")
    _stopped_ending(read)
    assert 3 <= len(read.ids) < 200 and read.text == "".join(ANSWER[:len(read.ids)])
    assert resumed.ids == [] and resumed.last_json()["stopped_early"] is True      # B never generates it again
    assert fresh.ids == read.ids and fresh.last_json()["tokens"] == len(read.ids)


# -- the core, on the virtual clock: within one token, every reader, and a reader that comes later ---------------
def test_a_stop_ends_generation_within_one_token_and_every_reader_with_the_early_done() -> None:
    from tokenwire.core.clock import VirtualClock
    from tokenwire.core.effects import Process, Sleep
    from tokenwire.core.model import Model, TimingModel
    from tokenwire.core.reader import MemoryReader
    from tokenwire.core.simulate import Simulation
    from tokenwire.core.stream import Ending, Stream
    from tokenwire.core.tokenlog import MemoryTokenLog, StreamState

    clock = VirtualClock()
    log = MemoryTokenLog(clock.now)
    stream = Stream("s", Model(ANSWER[:100], TimingModel(step_ns=1_000_000, ttft_ns=1_000_000, jitter=0.0)), log)
    first, second, later = MemoryReader(), MemoryReader(), MemoryReader()
    endings: dict[str, Ending] = {}

    def read(name: str, reader: MemoryReader, after_ns: int) -> Process:
        yield Sleep(after_ns)
        reader.begin_connection()
        endings[name] = yield from stream.serve(-1, stream.new_channel())

    def stop(after_ns: int) -> Process:
        yield Sleep(after_ns)
        stream.stop_generating()
        stream.stop_generating()                                     # twice: harmless

    sim = Simulation(clock)
    sim.spawn(read("first", first, 0), first)
    sim.spawn(read("second", second, 3_500_000), second)           # a follower of the log
    sim.spawn(stop(10_500_000))                                      # during token 10's step
    sim.spawn(read("later", later, 50_000_000), later)             # after the stop
    sim.run()
    logged = log.length("s")
    assert logged == 11                                              # token 10 was being made: none after it
    assert endings == {"first": Ending.DONE, "second": Ending.DONE, "later": Ending.DONE}
    for reader in (first, second, later):
        assert reader.ids == list(range(logged))
        done = json.loads(reader.events[-1].data)
        assert (reader.events[-1].event, reader.events[-1].id) == ("done", str(logged - 1))
        assert done["stopped_early"] is True and done["reason"] == "stopped" and done["tokens"] == logged
    assert log.state("s") is StreamState.STOPPED and not stream.producer_running
    log.set_state("s", StreamState.DONE)                             # stopped is final
    assert log.state("s") is StreamState.STOPPED
