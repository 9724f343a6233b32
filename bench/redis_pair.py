"""Issue 17: two ``tokenwire serve`` processes on one Redis, every stream cut once and resumed on the other.

How this works: a fresh ``redis-server`` and two ``tokenwire serve --log
redis://...`` processes (A and B).  The client (asyncio, one process) makes
N streams of the 277-token answer at 20 ms a token with ``POST /streams``,
alternately on A and B; half of them are first read on the process that
made them, half on the other one (the POST-then-GET pair a load balancer
splits).  Each reader hangs up after a random number of tokens (the cut)
and resumes with ``Last-Event-ID`` on the other process.  Checked per
stream: the two connections together give every index exactly once, in
order, with the answer's exact text and a normal ``done``; and the Redis
stream holds every index once (which process generated it is recorded in
each entry).  Reported: streams whole, resumes, who generated what, both
servers' CPU per token, Redis's CPU per token and its connections.

``python -m bench.redis_pair [N]`` (default 300).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
import time
from typing import Any

from tokenwire.core.model import ANSWER
from tokenwire.core.sse import Decoder

from .common import ROOT, env_with_root, machine
from .redis_scale import RedisServer
from .scale import PRODUCER_MS, TOKENS, _free_port, _proc_figures, _raise_nofile, _wait_listening

__all__ = ["run_pair"]

TIMEOUT_S = 120.0


def _serve(log_url: str, n: int) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--quiet", "--max-live", str(max(2 * n, 256)), "--max-streams", str(max(2 * n, 1024)),
                             "--log", log_url], cwd=ROOT, env=env_with_root(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=_raise_nofile)
    _wait_listening(port, proc)
    return proc, port


async def _http(port: int, method: str, path: str, headers: str = "") -> tuple[asyncio.StreamReader,
                                                                                 asyncio.StreamWriter, int]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\nContent-Length: 0\r\n\r\n"
                 .encode())
    head = await reader.readuntil(b"\r\n\r\n")
    return reader, writer, int(head.split(b" ", 2)[1])


async def _create(port: int, query: str) -> str:
    reader, writer, status = await _http(port, "POST", f"/streams?{query}")
    body = await reader.read()
    writer.close()
    if status != 201:
        raise RuntimeError(f"POST answered {status}: {body[:200]!r}")
    return str(json.loads(body)["events_url"])


async def _read(port: int, path: str, cursor: int | None, stop_after: int | None) -> tuple[list[int], list[str],
                                                                                          bool]:
    headers = f"Last-Event-ID: {cursor}\r\n" if cursor is not None else ""
    reader, writer, status = await _http(port, "GET", path, headers)
    ids: list[int] = []
    texts: list[str] = []
    done, decoder = False, Decoder()
    try:
        if status != 200:
            return ids, texts, done
        while not done:
            data = await reader.read(65536)
            if not data:
                break
            for event in decoder.feed(data):
                if event.event == "token":
                    ids.append(int(event.id or -1))
                    texts.append(event.data)
                    if stop_after is not None and len(ids) >= stop_after:
                        return ids, texts, done
                elif event.event == "done":
                    done = True
    finally:
        writer.close()
    return ids, texts, done


async def _one(ports: tuple[int, int], i: int, tokens: int, rng: random.Random) -> dict[str, Any]:
    maker = i % 2
    first = maker if i % 4 < 2 else 1 - maker            # half are first read on the other process
    path = await _create(ports[maker], f"tokens={tokens}&producer_ms={PRODUCER_MS:g}&buffer=4&seed={i}")
    cut = rng.randrange(1, tokens - 1)
    ids, texts, _ = await _read(ports[first], path, None, cut)
    more_ids, more_texts, done = await _read(ports[1 - first], path, ids[-1] if ids else None, None)
    whole = ids + more_ids == list(range(tokens)) and "".join(texts + more_texts) == "".join(ANSWER[:tokens])
    return {"path": path, "whole": whole and done, "crossed_first": first != maker, "cut": cut}


def _owners(redis: RedisServer, paths: list[str], pids: dict[str, str]) -> tuple[int, dict[str, int]]:
    from tokenwire.redislog.blocking import RedisTokenLog
    log = RedisTokenLog(redis.url, name="bench")
    exact, made = 0, {name: 0 for name in pids.values()}
    try:
        for path in paths:
            entries = log.entries(path.split("/")[2])
            exact += [i for i, _, _ in entries] == list(range(len(entries)))
            for _, _, by in entries:
                pid = re.sub(r".*:(\d+)/.*", r"\1", by)
                made[pids.get(pid, pid)] = made.get(pids.get(pid, pid), 0) + 1
    finally:
        log.close()
    return exact, made


def run_pair(n: int, tokens: int = TOKENS) -> dict[str, Any]:
    redis = RedisServer()
    servers = [_serve(redis.url, n), _serve(redis.url, n)]
    try:
        ports = (servers[0][1], servers[1][1])
        cpu0 = [_proc_figures(proc.pid)[0] for proc, _ in servers]
        stop = redis.watch()
        rng = random.Random(17)
        started = time.perf_counter()

        async def main() -> list[dict[str, Any]]:
            return list(await asyncio.wait_for(asyncio.gather(*(_one(ports, i, tokens, rng) for i in range(n))),
                                               TIMEOUT_S))
        results = asyncio.run(main())
        wall = time.perf_counter() - started
        said = json.loads(stop())
        cpu = [_proc_figures(proc.pid)[0] - c for (proc, _), c in zip(servers, cpu0, strict=True)]
        pids = {str(servers[0][0].pid): "A", str(servers[1][0].pid): "B"}
        exact, made = _owners(redis, [r["path"] for r in results], pids)
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(10)
        redis.stop()
    delivered = n * tokens
    return {"n": n, "tokens": tokens, "whole": sum(r["whole"] for r in results),
            "first_read_on_the_other": sum(r["crossed_first"] for r in results), "logged_once": exact,
            "generated_by": made, "wall_s": round(wall, 1),
            "server_cpu_us_per_token": round(sum(cpu) / delivered * 1e6, 1),
            "redis_cpu_us_per_token": round(said["redis_cpu_s"] / delivered * 1e6, 1),
            "redis_connections": said["connections"]}


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 300
    load = os.getloadavg()[0]
    result = run_pair(n)
    print(f"python -m bench.redis_pair {n} on {machine()}; 1-minute load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
