"""The log writer's RESP (``tokenwire.redislog.resp``) against a real ``redis-server``: a round packed as the writer
packs it, with the replies it meets (the landed ``XADD``s, a refused one, one on a stream that is gone, script
errors nested and not, ``NOSCRIPT``), in RESP2 and RESP3, reads back as redis-py reads the same commands; and
1,000 appends read back by one resume read.  (Without a server: ``unit/test_resp.py``.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from redis.exceptions import NoScriptError, ResponseError
from support.redis import operator

from tokenwire.core.model import ANSWER
from tokenwire.redislog.resp import Replies, pack, pack_xadd, xadd_reply

# A script that answers an array holding an error, a nil (Lua false, in RESP2 and RESP3 alike) and a number.
NESTED_SCRIPT = "return {redis.error_reply('ERR inner'), false, 7}"


# The commands after the round's XADDs, each with what the writer's parse must give (as redis-py gives it).
ROUND: list[tuple[tuple[object, ...], Callable[[Any, int], bool]]] = [
    (("XADD", "k", "NOMKSTREAM", "1-1", "t", "refused"),
     lambda r, _: type(r) is ResponseError and str(r) == "ERR The ID specified in XADD is equal or smaller than "
                                                          "the target stream top item"),
    (("XADD", "gone", "NOMKSTREAM", "1-9", "t", "x"), lambda r, _: r is None),
    (("EVALSHA", "0" * 40, 0), lambda r, _: type(r) is NoScriptError and str(r).startswith("NOSCRIPT ")),
    (("EVAL", NESTED_SCRIPT, 0),
     lambda r, _: type(r[0]) is ResponseError and str(r[0]) == "ERR inner" and r[1:] == [None, 7]),
    (("EVAL", "return redis.error_reply('ERR top')", 0), lambda r, _: type(r) is ResponseError and str(r) == "ERR top"),
    (("HSET", "h", "a", "1"), lambda r, _: r == 1),
    (("HGETALL", "h"), lambda r, v: r == (["a", "1"] if v == 2 else {"a": "1"})),
    (("XRANGE", "k", "-", "+"),
     lambda r, _: r == [[f"1-{i}", ["t", tok]] for i, tok in ((1, "é"), (2, " b"), (3, "\n\n"))]),
    (("GET", "missing"), lambda r, _: r is None),
]


def operator_auth() -> tuple[str, ...]:
    """``HELLO``'s ``AUTH`` as the tests' operator, where the servers hold the docs' rule (the key ``k`` is
    outside the log's prefix)."""
    login = operator()
    return ("AUTH", login["username"], login["password"]) if login else ()


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_round_as_the_writer_packs_it_reads_back_from_a_real_redis(redis_server: Any, protocol: int) -> None:
    entries = [(b"1-1", "é"), (b"1-2", " b"), (b"1-3", "\n\n")]
    xadds = b"".join(pack_xadd(b"k", entry, text.encode()) for entry, text in entries)
    expect = b"".join(xadd_reply(entry) for entry, _ in entries)

    async def scene() -> tuple[bool, list[Any]]:
        reader, writer = await asyncio.open_connection("127.0.0.1", redis_server.port)
        replies = Replies(reader)
        writer.write(pack(("HELLO", protocol, *operator_auth())) + pack(("XADD", "k", "1-0", "t", "start"))
                     + pack(("XDEL", "k", "1-0")))
        [await replies.read() for _ in range(3)]
        writer.write(xadds + b"".join(pack(args) for args, _ in ROUND))        # a round goes after the last
        landed = await replies.skip(expect)
        got = [await replies.read() for _ in ROUND]
        writer.close()
        return landed, got
    landed, got = asyncio.run(scene())
    assert landed                                   # the landed XADDs: one comparison, nothing parsed
    for (args, check), reply in zip(ROUND, got, strict=True):
        assert check(reply, protocol), (args, reply)


def test_a_thousand_appends_come_back_in_one_resume_read(redis_server: Any) -> None:
    from tokenwire.redislog.blocking import RedisTokenLog
    tokens = [ANSWER[i % len(ANSWER)] for i in range(1000)]

    async def scene() -> tuple[list[str], list[str], int]:
        log = RedisTokenLog(redis_server.url).aio
        stream_id = uuid.uuid4().hex
        await log.create(stream_id, {"seed": 1}, len(tokens))
        assert (await log.claim(stream_id)).owned
        await asyncio.gather(*(log.append_future(stream_id, i, tok) for i, tok in enumerate(tokens)))
        rounds = log.writer.rounds
        whole = await log.read_after(stream_id, -1)
        tail = await log.read_after(stream_id, 989)
        await log.close()
        return whole, tail, rounds
    whole, tail, rounds = asyncio.run(scene())
    assert whole == tokens and tail == tokens[990:]
    assert rounds < 10                              # the appends went in a few rounds, each read by the skip
