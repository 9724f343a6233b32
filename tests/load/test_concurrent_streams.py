"""200 concurrent streams over loopback, read by one selector loop: each completes, contiguous, once."""

from __future__ import annotations

import selectors
import socket
import threading
import time

from support.live import TIMEOUT_S, serving, wait_until

from tokenwire.core.model import ANSWER
from tokenwire.core.sse import Decoder

STREAMS = 200
TOKENS = 100
DEADLINE_S = 60.0


def test_200_concurrent_streams_each_complete_and_contiguous() -> None:
    baseline_threads = threading.active_count()
    with serving() as server:
        selector = selectors.DefaultSelector()
        decoders: dict[socket.socket, Decoder] = {}
        ids: dict[socket.socket, list[int]] = {}
        texts: dict[socket.socket, list[str]] = {}
        done: dict[socket.socket, bool] = {}
        heads: dict[socket.socket, bytes] = {}
        for _ in range(STREAMS):
            sock = socket.create_connection(server.server_address[:2], timeout=TIMEOUT_S)
            sock.sendall(f"GET /stream?tokens={TOKENS}&scenario=block HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            decoders[sock], ids[sock], texts[sock], done[sock], heads[sock] = Decoder(), [], [], False, b""
        open_streams, deadline = STREAMS, time.monotonic() + DEADLINE_S
        while open_streams and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1.0):
                sock = key.fileobj  # type: ignore[assignment]
                chunk = sock.recv(65536)
                if not chunk:
                    selector.unregister(sock)
                    sock.close()
                    open_streams -= 1
                    continue
                if b"\r\n\r\n" not in heads[sock]:
                    heads[sock] += chunk
                    if b"\r\n\r\n" not in heads[sock]:
                        continue
                    chunk = heads[sock].partition(b"\r\n\r\n")[2]
                for event in decoders[sock].feed(chunk):
                    if event.event == "token":
                        ids[sock].append(int(event.id))
                        texts[sock].append(event.data)
                    elif event.event == "done":
                        done[sock] = True
        selector.close()
        peak = server.registry.peak_live
        wait_until(lambda: server.registry.producers_running == 0, "every producer to finish")
        wait_until(lambda: threading.active_count() <= baseline_threads + 1, "threads back to baseline")
    assert open_streams == 0, f"{open_streams} streams still open after {DEADLINE_S} s"
    assert all(head.startswith(b"HTTP/1.") and b" 200 " in head.split(b"\r\n")[0] for head in heads.values())
    assert all(done.values())
    answer = "".join(ANSWER[:TOKENS])
    for sock in ids:
        assert ids[sock] == list(range(TOKENS))
        assert "".join(texts[sock]) == answer
    assert peak > 1            # the streams really overlapped
