"""A compressed answer is refused by its encoding, never inflated: the client, ``tokenwire read`` and the proxy.

httpx asks for ``gzip, deflate, zstd`` by default and inflates whatever
``Content-Encoding`` comes back before any bound of tokenwire's decoder
applies: the probe's 32 KB of zstd became 1 GiB in one piece (2.1 GB of
peak memory for ``events``, ``tokenwire read`` and ``tokenwire proxy``).
A loopback server here (``Compressing``) answers every request with a bomb
of ``EXPANDED_BYTES`` (256 MiB of ``x`` in 260 KB of gzip, or 8 KB of zstd
when ``zstandard`` is installed): as an SSE stream, as a 400's body, as a
model list.  Each reader asks for ``Accept-Encoding: identity`` (the
server records each request's headers), refuses the answer naming its
encoding, and this process's peak RSS (``VmHWM``, reset before each read
through ``/proc/self/clear_refs``; else ``ru_maxrss``) grows by less than
``GROWTH_LIMIT_BYTES``.  The proxy runs in this process (uvicorn in a
thread), so its memory and its log lines are this process's.  A model list
longer than ``MAX_MODEL_LIST_BYTES`` is refused by name, not read whole.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import re
import resource
import socketserver
import threading
import zlib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import openai
import pytest
from support.asgi_thread import in_thread
from support.live import read_request

from tokenwire.asgi import TokenStreams
from tokenwire.client import ProtocolError, StreamRefused, aevents, events
from tokenwire.client.command import cli_main
from tokenwire.upstream import Upstream, UpstreamConfig, UpstreamMalformed, UpstreamStatus
from tokenwire.upstream.relay import MAX_MODEL_LIST_BYTES

# What each bomb inflates to: past the 200 MB a reader that inflated it would hold, far past the decoder's
# bounds (about 15 MB), and still quick to make here (0.7 s of gzip).
EXPANDED_BYTES = 256 << 20
# What reading a bomb may add to this process's peak memory: an eighth of what it inflates to (the readers
# hold a 4 KiB error body at most; the rest is the first request's own allocations through the proxy).
GROWTH_LIMIT_BYTES = 32 << 20
# A model list a little past the bound: models with long names, as a broken upstream might repeat them.
BIG_LIST_MODELS = 1 + MAX_MODEL_LIST_BYTES // 1000
ENCODINGS = [
    "gzip",
    pytest.param("zstd", marks=pytest.mark.skipif(importlib.util.find_spec("zstandard") is None,
                                                  reason="zstandard is not installed: httpx reads no zstd")),
]
TIMEOUT_S = 30.0
T = TypeVar("T")


@cache
def bomb(encoding: str) -> bytes:
    """``EXPANDED_BYTES`` of ``x`` compressed in ``encoding``, made a block at a time (never held inflated)."""
    block = b"x" * (1 << 20)
    if encoding == "zstd":
        import zstandard
        compressor = zstandard.ZstdCompressor(level=19).compressobj()
        return b"".join([*(compressor.compress(block) for _ in range(EXPANDED_BYTES // len(block))),
                         compressor.flush()])
    gzip = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    return b"".join([*(gzip.compress(block) for _ in range(EXPANDED_BYTES // len(block))), gzip.flush()])


def _answer(status: str, kind: str, body: bytes, encoding: str | None = None) -> bytes:
    coded = [f"Content-Encoding: {encoding}"] if encoding else []
    lines = [f"HTTP/1.1 {status}", f"Content-Type: {kind}", *coded, f"Content-Length: {len(body)}",
             "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def answer(path: str) -> bytes:
    """The answer to ``path``, ``/<mode>/...``: the mode is an encoding (``gzip``, ``zstd``: a compressed SSE
    stream, or model list at ``.../models``), ``<encoding>-refused`` (a compressed 400), ``biglist`` (a model list
    past ``MAX_MODEL_LIST_BYTES``) or ``list`` (a model list of one)."""
    mode = path.split("/")[1]
    models = path.endswith("/models")
    if mode == "list":
        return _answer("200 OK", "application/json", json.dumps({"object": "list", "data": [{"id": "m"}]}).encode())
    if mode == "biglist":
        listed = [{"id": f"model-{i:0990d}", "object": "model"} for i in range(BIG_LIST_MODELS)]
        return _answer("200 OK", "application/json", json.dumps({"object": "list", "data": listed}).encode())
    if mode.endswith("-refused"):
        return _answer("400 Bad Request", "text/plain", bomb(mode.removesuffix("-refused")),
                       mode.removesuffix("-refused"))
    return _answer("200 OK", "application/json" if models else "text/event-stream", bomb(mode), mode)


class Compressing:
    """The server: every request answered as its path says (``answer``); ``asked`` holds each request's path and
    headers (names in lower case), in the order they came."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, str]]] = []
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.connection.settimeout(TIMEOUT_S)
                read = read_request(self.connection)
                if read is None:
                    return
                path, headers, _ = read
                owner.asked.append((path, headers))
                try:
                    self.connection.sendall(answer(path))
                except OSError:
                    pass                             # the reader left once it had seen the head: what we want

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def headers_of(self, path: str) -> dict[str, str]:
        """The headers of the last request for ``path``."""
        return [headers for asked, headers in self.asked if asked == path][-1]

    def __enter__(self) -> Compressing:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(TIMEOUT_S)


@pytest.fixture(scope="module")
def server() -> Iterator[Compressing]:
    with Compressing() as one:
        yield one


def _peak_kb() -> int:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB$", status, re.M).group(1))  # type: ignore[union-attr]


def peak_growth(read: Callable[[], T]) -> tuple[T, int]:
    """What ``read`` returns and how far it raised this process's peak RSS, in bytes: ``VmHWM`` reset to the RSS
    first (``/proc/self/clear_refs``), else the growth of ``ru_maxrss`` (a lower bound then)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        peak: Callable[[], int] = _peak_kb
    except OSError:
        peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # noqa: E731  (kB on Linux)
    before = peak()
    got = read()
    return got, (peak() - before) * 1024


def raised(kind: type[Exception], read: Callable[[], object]) -> tuple[str, int]:
    """The message of the ``kind`` ``read`` raises, and how far reading raised the peak RSS."""
    def failing() -> str:
        with pytest.raises(kind) as caught:
            read()
        return str(caught.value)
    return peak_growth(failing)


def read_all(url: str, kind: str) -> None:
    """Every event of ``url`` with ``events`` or ``aevents``, one attempt."""
    if kind == "sync":
        list(events(url, max_attempts=1))
        return

    async def main() -> None:
        async for _ in aevents(url, max_attempts=1):
            pass
    asyncio.run(main())


def assert_identity_asked(server: Compressing, path: str) -> None:
    assert server.headers_of(path).get("accept-encoding") == "identity", server.headers_of(path)


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_client_refuses_a_compressed_stream_by_its_encoding(server: Compressing, encoding: str,
                                                                kind: str) -> None:
    bomb(encoding)                                                   # made before the peak is measured
    said, growth = raised(ProtocolError, lambda: read_all(f"{server.url}/{encoding}/events", kind))
    assert said == (f"/{encoding}/events answered 200 with Content-Encoding '{encoding}'; tokenwire asks for "
                    f"identity (an SSE stream is not compressed)")
    assert growth < GROWTH_LIMIT_BYTES, f"peak RSS grew by {growth >> 20} MiB"
    assert_identity_asked(server, f"/{encoding}/events")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_client_names_a_compressed_refusal_without_reading_it(server: Compressing, encoding: str) -> None:
    bomb(encoding)
    said, growth = raised(StreamRefused, lambda: read_all(f"{server.url}/{encoding}-refused/events", "sync"))
    assert said == (f"/{encoding}-refused/events answered 400 Bad Request: a body in Content-Encoding "
                    f"'{encoding}', not read (tokenwire asks for identity)")
    assert growth < GROWTH_LIMIT_BYTES, f"peak RSS grew by {growth >> 20} MiB"
    assert_identity_asked(server, f"/{encoding}-refused/events")


def test_tokenwire_read_says_the_encoding_and_exits_1(server: Compressing, capsys: pytest.CaptureFixture[str]) -> None:
    bomb("gzip")
    status, growth = peak_growth(lambda: cli_main([f"{server.url}/gzip/events", "--max-attempts", "1"]))
    assert (status, capsys.readouterr().err) == (1, "tokenwire read: /gzip/events answered 200 with Content-Encoding "
                                                    "'gzip'; tokenwire asks for identity (an SSE stream is not "
                                                    "compressed)\n")
    assert growth < GROWTH_LIMIT_BYTES, f"peak RSS grew by {growth >> 20} MiB"


def ask(base: str) -> tuple[str, str]:
    """A streamed chat completion through the proxy at ``base``: its text and the failure it ended with."""
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=TIMEOUT_S)
    text: list[str] = []
    with pytest.raises(openai.APIError) as failed:
        for chunk in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                    stream=True):
            text.extend(choice.delta.content or "" for choice in chunk.choices)
    return "".join(text), failed.value.message


def logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_proxy_fails_a_compressed_answer_naming_its_encoding(server: Compressing, encoding: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    bomb(encoding)
    caplog.set_level(logging.ERROR, logger="tokenwire")
    upstream = f"{server.url}/{encoding}/v1"
    with in_thread(TokenStreams(Upstream(UpstreamConfig(upstream)))) as base:
        got, growth = peak_growth(lambda: ask(base))
    assert got == ("", "the model raised UpstreamMalformed")
    assert f"UpstreamMalformed: the upstream at {upstream}/chat/completions answered with Content-Encoding " \
           f"'{encoding}'; tokenwire asks for identity (an SSE stream is not compressed)" in logged(caplog)
    assert growth < GROWTH_LIMIT_BYTES, f"peak RSS grew by {growth >> 20} MiB"
    assert_identity_asked(server, f"/{encoding}/v1/chat/completions")


def test_the_proxy_names_a_compressed_refusal_without_quoting_it(server: Compressing,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    bomb("gzip")
    caplog.set_level(logging.ERROR, logger="tokenwire")
    with in_thread(TokenStreams(Upstream(UpstreamConfig(f"{server.url}/gzip-refused/v1")))) as base:
        got, growth = peak_growth(lambda: ask(base))
    assert got == ("", "the model raised UpstreamStatus")
    assert "UpstreamStatus: the upstream answered 400: a body in Content-Encoding 'gzip', not read (tokenwire " \
           "asks for identity)" in logged(caplog)
    assert growth < GROWTH_LIMIT_BYTES, f"peak RSS grew by {growth >> 20} MiB"
    assert_identity_asked(server, "/gzip-refused/v1/chat/completions")


def model_ids(url: str) -> list[str]:
    async def listed() -> list[str]:
        upstream = Upstream(UpstreamConfig(url))
        try:
            return await upstream.model_ids()
        finally:
            await upstream.aclose()
    return asyncio.run(listed())


def test_a_model_list_is_read_raw(server: Compressing) -> None:
    assert model_ids(f"{server.url}/list/v1") == ["m"]
    assert_identity_asked(server, "/list/v1/models")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_compressed_model_list_is_refused_by_its_encoding(server: Compressing, encoding: str) -> None:
    bomb(encoding)
    said, growth = raised(UpstreamMalformed, lambda: model_ids(f"{server.url}/{encoding}/v1"))
    assert said == (f"the upstream at {server.url}/{encoding}/v1/models answered with Content-Encoding "
                    f"'{encoding}'; tokenwire asks for identity (a model list is not compressed)")
    assert growth < GROWTH_LIMIT_BYTES, f"peak RSS grew by {growth >> 20} MiB"
    assert_identity_asked(server, f"/{encoding}/v1/models")


def test_a_compressed_model_list_refusal_is_not_quoted(server: Compressing) -> None:
    bomb("gzip")
    said, growth = raised(UpstreamStatus, lambda: model_ids(f"{server.url}/gzip-refused/v1"))
    assert said == "the upstream answered 400: a body in Content-Encoding 'gzip', not read (tokenwire asks for " \
                   "identity)"
    assert growth < GROWTH_LIMIT_BYTES, f"peak RSS grew by {growth >> 20} MiB"


def test_a_model_list_past_its_bound_is_refused_by_name(server: Compressing) -> None:
    said, _ = raised(UpstreamMalformed, lambda: model_ids(f"{server.url}/biglist/v1"))
    assert said == (f"the upstream's model list at {server.url}/biglist/v1/models is longer than "
                    f"MAX_MODEL_LIST_BYTES ({MAX_MODEL_LIST_BYTES} bytes)")


def test_the_bomb_is_what_it_says() -> None:
    """The gzip bomb inflates to ``EXPANDED_BYTES`` (read back a block at a time, never held whole)."""
    inflate, total = zlib.decompressobj(zlib.MAX_WBITS | 16), 0
    data = bomb("gzip")
    for start in range(0, len(data), 4096):
        total += len(inflate.decompress(data[start:start + 4096]))
    assert total == EXPANDED_BYTES and len(data) < EXPANDED_BYTES // 500
