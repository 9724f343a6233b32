"""``tokenwire.client`` and ``tokenwire read`` against both real servers, through a proxy that cuts every
connection after a few hundred bytes (``support.cutting_proxy``): the whole stream, each index once, the text
equal to the uninterrupted read; a 404, a 4xx, attempts running out, a failed model.

The servers: ``tokenwire serve``'s ``LiveServer`` (in this process) and ``support.apps.fake_model:app`` under
uvicorn (the canned answer mounted at ``/canned``, a fake model at ``/tokens``).  In-process reads record their waits
instead of sleeping; the commands run as typed sleep for real (the stream's ``retry``, 750 ms).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support.asgi import uvicorn
from support.cutting_proxy import CuttingProxy
from support.docs import code_block, section
from support.live import serving
from support.requirements import ROOT

from tokenwire.client import AttemptsExhausted, Backoff, Event, StreamRefused, aevents, events
from tokenwire.client.command import cli_main

# The proxy's cut: past a response head (about 230 bytes) and an open frame (about 150), a few tokens more.
LIMIT = 600
TOKENS = 277
NO_JITTER = Backoff(jitter=0)


class Server:
    """A running server: ``base`` its URL with the mount prefix; ``upstream`` its address for the proxy."""

    def __init__(self, upstream: tuple[str, int], prefix: str) -> None:
        self.upstream, self.prefix = upstream, prefix
        self.base = f"http://{upstream[0]}:{upstream[1]}{prefix}"

    def via(self, proxy: CuttingProxy) -> str:
        return proxy.url + self.prefix


@pytest.fixture(scope="module", params=["serve", "uvicorn"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "serve":
        with serving() as live:
            yield Server(live.address, "")
    else:
        with uvicorn("support.apps.fake_model:app") as app:
            yield Server(("127.0.0.1", app.port), "/canned")


def tokens_of(got: list[Event]) -> tuple[list[int], str]:
    tokens = [e for e in got if e.event == "token"]
    return [int(e.id) for e in tokens], "".join(e.data for e in tokens)


@pytest.fixture(scope="module")
def whole(server: Server) -> str:
    """The answer's text read straight from the server, no proxy, no cut."""
    got = list(events(f"{server.base}/stream?tokens={TOKENS}"))
    ids, text = tokens_of(got)
    assert ids == list(range(TOKENS)) and got[-1].event == "done"
    return text


def read_through_proxy(server: Server, kind: str) -> tuple[list[Event], list[float], CuttingProxy]:
    waits: list[float] = []
    with CuttingProxy(server.upstream, LIMIT) as proxy:
        url = f"{server.via(proxy)}/stream?tokens={TOKENS}"
        if kind == "sync":
            got = list(events(url, backoff=NO_JITTER, sleep=waits.append))
        else:
            async def sleep(seconds: float) -> None:
                waits.append(seconds)

            async def main() -> list[Event]:
                return [e async for e in aevents(url, backoff=NO_JITTER, sleep=sleep)]

            got = asyncio.run(main())
    return got, waits, proxy


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_client_gives_the_whole_stream_through_a_proxy_that_cuts_every_connection(
        server: Server, whole: str, kind: str) -> None:
    got, waits, proxy = read_through_proxy(server, kind)
    ids, text = tokens_of(got)
    assert ids == list(range(TOKENS))                       # each index once, in order
    assert text == whole
    # It ended at ``done``, or, when the cut took ``done`` and left the last token, at the 204 of the reconnect.
    assert [e.event for e in got].count("done") == (got[-1].event == "done")
    assert proxy.cut >= 10
    assert len(waits) == proxy.connections - 1 and set(waits) == {0.75}  # each reconnect waited the stream's retry


def test_tokenwire_read_prints_the_whole_text_through_the_proxy(server: Server, whole: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    with CuttingProxy(server.upstream, LIMIT) as proxy:
        status = cli_main([f"{server.via(proxy)}/stream?tokens={TOKENS}"], sleep=lambda seconds: None)
    out, err = capsys.readouterr()
    assert (status, out, err) == (0, whole, "")
    assert proxy.cut >= 10


def test_tokenwire_read_resumes_after_a_given_last_event_id(server: Server,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    got = list(events(f"{server.base}/stream?tokens={TOKENS}"))
    stream_id = json.loads(got[0].data)["stream_id"]
    status = cli_main([f"{server.base}/streams/{stream_id}/events", "--last-event-id", "9"])
    assert capsys.readouterr() == ("".join(e.data for e in got if e.event == "token" and int(e.id) > 9), "")
    assert status == 0


def run_read(*argv: str) -> subprocess.CompletedProcess[str]:
    """``tokenwire read ARGV`` as typed, in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "tokenwire", "read", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_tokenwire_read_as_typed_resumes_by_itself(server: Server) -> None:
    reference = tokens_of(list(events(f"{server.base}/stream?tokens=20")))[1]
    with CuttingProxy(server.upstream, LIMIT) as proxy:
        done = run_read(f"{server.via(proxy)}/stream?tokens=20")
    assert (done.returncode, done.stdout, done.stderr) == (0, reference, "")
    assert proxy.cut >= 2


def test_a_404_is_one_line_on_stderr_and_exit_1(server: Server) -> None:
    done = run_read(f"{server.base}/streams/nope/events")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"tokenwire read: {server.prefix}/streams/nope/events answered 404 Not Found: unknown stream 'nope': "
        "never created here, evicted from the token log (too old or too many streams), or lost when the server "
        "restarted; start a new one with POST /streams\n")


def test_a_4xx_raises_with_the_servers_message(server: Server) -> None:
    with pytest.raises(StreamRefused) as raised:
        list(events(f"{server.base}/stream?tokens=0"))
    assert raised.value.status == 400
    assert str(raised.value) == (f"{server.prefix}/stream answered 400 Bad Request: "
                                 "tokens must be a whole number from 1 to 277; got '0'")


def test_attempts_running_out_raise(server: Server) -> None:
    waits: list[float] = []
    with CuttingProxy(server.upstream, 100) as proxy, pytest.raises(AttemptsExhausted) as raised:
        list(events(f"{server.via(proxy)}/stream?tokens=5", max_attempts=3, backoff=NO_JITTER,
                    sleep=waits.append))
    assert str(raised.value) == (f"gave up on {server.prefix}/stream after 3 attempts in a row without a new "
                                 "event; the last: RemoteProtocolError: Server disconnected without sending a "
                                 "response.")
    assert proxy.connections == 3 and waits == [2.0, 4.0]


def test_a_failed_model_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with uvicorn("support.apps.fake_model:app") as app:
        status = cli_main([f"{app.url}/tokens/stream?n=6&mode=raise&at=3"])
    out, err = capsys.readouterr()
    assert (status, out) == (1, " t0 t1 t2")
    assert err == "tokenwire read: the stream failed: the model raised RuntimeError\n"


def test_the_readmes_example_prints_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    code = code_block(section("Reading a stream from Python"), "python")
    with serving() as live:
        base = f"http://{live.address[0]}:{live.address[1]}"
        reference = tokens_of(list(events(f"{base}/stream?tokens=40")))[1]
        exec(code.replace("http://127.0.0.1:8000", base), {})   # the README's own code
    assert capsys.readouterr() == (reference, "")


def test_a_reader_of_stdout_that_goes_away_ends_it_quietly(server: Server) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    # 100 tokens 20 ms apart: the first is read and the pipe closed long before the last one is written.
    url = f"{server.base}/stream?tokens=100&producer_ms=20"
    with subprocess.Popen([sys.executable, "-m", "tokenwire", "read", url],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as reader:
        assert reader.stdout is not None and reader.stderr is not None
        assert reader.stdout.read(1) == b"A"                   # as ``| head -c 1`` does
        reader.stdout.close()
        assert reader.wait(60) == 1
        assert reader.stderr.read() == b""
