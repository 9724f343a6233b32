"""``tokenwire serve`` processes on one shared log, and a raw loopback request to them; no tests here.

``Instance(log_url, name)`` runs ``python -m tokenwire serve --port 0 --log <url>`` with a short lease (so a
takeover comes within a second), reading its port from the banner; ``request`` sends one HTTP request on a raw
socket and decodes an event stream with the project's own decoder; ``owners`` reads back from the Redis stream
which instance generated each index (every entry records its owner) and ``runs`` groups them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field

from tokenwire.core.sse import Decoder

# A takeover waits for the dead owner's lease: short here so the test is quick.
LEASE_MS = 400
BLOCK_MS = 50
START_TIMEOUT_S = 30.0
IO_TIMEOUT_S = 10.0


class Instance:
    """One ``tokenwire serve`` process; ``name`` labels it in the log's owner ids."""

    def __init__(self, log_url: str, name: str, loop: str | None = None) -> None:
        self.name = name
        env = dict(os.environ)
        env.pop("TOKENWIRE_LOG_URL", None)
        if loop is not None:
            env["TOKENWIRE_LOOP"] = loop
        url = f"{log_url}?lease_ms={LEASE_MS}&block_ms={BLOCK_MS}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tokenwire", "serve", "--port", "0", "--quiet", "--log", url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.port = self._read_port()
        self.pid = self.proc.pid

    def _read_port(self) -> int:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        line = box[0] if box else ""
        if "serving on http://127.0.0.1:" not in line:
            self.kill()
            raise RuntimeError(f"instance {self.name} did not start: {line!r} {self.proc.stderr.read()!r}")
        return int(line.split("http://127.0.0.1:")[1].split("/")[0])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe:
                pipe.close()


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    ids: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    done: bool = False
    ending: dict = field(default_factory=dict)     # the done event's data

    def json(self) -> dict:
        return json.loads(self.body)


def request(port: int, method: str, path: str, *, last_event_id: int | None = None,
            stop_after: int | None = None, on_token=None) -> Reply:
    """One HTTP request on loopback; an event stream is decoded until ``done``, EOF or ``stop_after`` tokens."""
    extra = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Connection: close\r\n"
                     f"Content-Length: 0\r\n\r\n".encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        reply = Reply(int(lines[0].split()[1]),
                      {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])})
        if not reply.headers.get("content-type", "").startswith("text/event-stream"):
            while chunk := sock.recv(65536):
                rest += chunk
            reply.body = rest
            return reply
        decoder = Decoder()
        while True:
            for event in decoder.feed(rest):
                if event.event == "token":
                    reply.ids.append(int(event.id))
                    reply.texts.append(event.data)
                    if on_token:
                        on_token(reply)
                    if stop_after is not None and len(reply.ids) >= stop_after:
                        return reply
                elif event.event == "done":
                    reply.done, reply.ending = True, json.loads(event.data)
            try:
                rest = sock.recv(65536)
            except ConnectionResetError:
                break
            if not rest:
                break
    return reply


def create(inst: Instance, query: str) -> str:
    reply = request(inst.port, "POST", f"/streams?{query}")
    assert reply.status == 201, reply
    return reply.json()["events_url"]


def log_at(url: str, name: str = "test", **settings: int):
    """A blocking Redis log on ``url`` (imported here: it needs the redis extra)."""
    from tokenwire.redislog.blocking import RedisTokenLog
    return RedisTokenLog(url, name=name, **settings)


def owners(url: str, stream_id: str, *instances: Instance) -> list[str]:
    """Who generated each index, in index order, from the Redis stream itself (owner ids are host:pid/...)."""
    entries = log_at(url).entries(stream_id)
    assert [i for i, _, _ in entries] == list(range(len(entries)))        # every index once, none missing
    names = {str(inst.pid): inst.name for inst in instances}
    return [names.get(by.split("/")[0].rpartition(":")[2], by) for _, _, by in entries]


def runs(names: list[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for name in names:
        if out and out[-1][0] == name:
            out[-1] = (name, out[-1][1] + 1)
        else:
            out.append((name, 1))
    return out
