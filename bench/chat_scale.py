"""Item 11 (C): CPU per token of the AI SDK's chat protocol against tokenwire's own frames, N=300, both servers.

How this works: the same stream, rendered two ways: tokenwire's frames
(``GET /stream?<parameters>``: ``open``, one ``token`` frame per token,
``done``) and the AI SDK's UI message stream (``POST /chat`` with the same
parameters in its JSON body: ``start`` ... one ``text-delta`` per token ...
``finish``, ``[DONE]``), on both servers: ``tokenwire serve`` and
``uvicorn tokenwire.asgi:app`` (uvloop, httptools).  Item 5's client
(``bench.scale_client``, one process, kernel receive stamps; it reads either
protocol) opens N streams of the 277-token answer at 20 ms per token, and
the server's CPU seconds over the client's run are read from ``/proc``.
The four runs take turns, ``ROUNDS`` times, so all see the same machine;
each figure is its median round.  The goal: the chat protocol's CPU per
delivered token at most 1.3x the frames' on each server, every stream
complete and contiguous.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable

from .asgi_scale import per_token_us
from .common import Row, log
from .scale import PRODUCER_MS, TOKENS, Step, one_step, query

__all__ = ["run"]

FULL_N, QUICK_N = 300, 20
QUICK_TOKENS = 50
FULL_ROUNDS, QUICK_ROUNDS = 3, 1
GOAL_RATIO = 1.3
SERVERS = ("tokenwire serve", "uvicorn tokenwire.asgi:app")
PROTOCOLS = ("frames", "chat")


def _command(server: str, n: int) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        if server == "tokenwire serve":
            return [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1", "--port", str(port),
                    "--quiet", "--max-live", str(max(n * 2, 256)), "--max-streams", str(max(n * 2, 1024))]
        return [sys.executable, "-m", "uvicorn", "tokenwire.asgi:app", "--host", "127.0.0.1", "--port", str(port),
                "--loop", "uvloop", "--http", "httptools", "--log-level", "warning", "--no-access-log",
                "--backlog", "4096"]
    return command


def measure(server: str, protocol: str, n: int, tokens: int) -> Step:
    """One run: ``server`` started afresh, item 5's client reading ``n`` streams in ``protocol``."""
    path = f"/{'chat' if protocol == 'chat' else 'stream'}?{query(tokens)}"
    return one_step(f"{server} ({protocol})", n, tokens, command=_command(server, n), path=path)


def _median(steps: list[Step]) -> Step:
    return sorted(steps, key=per_token_us)[len(steps) // 2]


def run(quick: bool) -> list[Row]:
    if importlib.util.find_spec("uvloop") is None or importlib.util.find_spec("httptools") is None:
        return [Row(11, "chat protocol vs frames", "not run",
                    notes=("uvicorn, uvloop and httptools are needed: pip install -e '.[bench]'",))]
    n, tokens = (QUICK_N, QUICK_TOKENS) if quick else (FULL_N, TOKENS)
    rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    runs: dict[tuple[str, str], list[Step]] = {(s, p): [] for s in SERVERS for p in PROTOCOLS}
    for _ in range(rounds):
        for key in runs:
            step = measure(*key, n, tokens)
            log(f"bench: item 11: {step.describe()}")
            runs[key].append(step)
    notes = (f"{n} streams of {tokens} tokens at {PRODUCER_MS:g} ms (jitter 10%, seed 1); frames: GET /stream?"
             f"<parameters>; chat: POST /chat with the same parameters in the JSON body; item 5's client reads "
             f"both; {rounds} round(s), the four runs taking turns, each figure its median round by CPU per token",
             *(f"round: {s.describe()}" for steps in runs.values() for s in steps))
    rows = []
    for server in SERVERS:
        frames, chat = _median(runs[(server, "frames")]), _median(runs[(server, "chat")])
        ratio = per_token_us(chat) / per_token_us(frames)
        complete = frames.client["complete"] == n and chat.client["complete"] == n
        rows.append(Row(11, f"{server} N={n}: CPU per token, us (chat / frames)", f"chat {per_token_us(chat):.0f}",
                        f"frames {per_token_us(frames):.0f}", ratio, f"<= {GOAL_RATIO}x",
                        ratio <= GOAL_RATIO and complete,
                        notes if server == SERVERS[0] else ()))
        rows.append(Row(11, f"{server} N={n}: complete (chat | frames)",
                        f"{chat.client['complete']}/{n}", f"{frames.client['complete']}/{n}", None, "all",
                        complete))
    return rows
