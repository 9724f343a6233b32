"""The log writer's RESP (``tokenwire.redislog.resp``) without a server: its packing, its one-comparison skip,
hiredis's parse.

What is asserted: every reply type comes back as redis-py gives it with ``decode_responses`` (errors as exception
objects in their place, ``NOSCRIPT`` as ``NoScriptError``) whatever the chunks the bytes arrive in, and ``skip``
consumes the expected bytes or nothing and never waits for bytes a differing reply does not send.  (Against a
real ``redis-server``: ``redis/test_redis_resp.py``.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, NoScriptError, ResponseError

from tokenwire.redislog.resp import Replies, pack, pack_xadd, xadd_reply


def _replies(*chunks: bytes, eof: bool = False) -> Replies:
    stream = asyncio.StreamReader()
    for chunk in chunks:
        stream.feed_data(chunk)
    if eof:
        stream.feed_eof()
    return Replies(stream)


def _read_all(data: bytes, count: int, chunk: int) -> list[Any]:
    async def scene() -> list[Any]:
        stream = asyncio.StreamReader()
        replies = Replies(stream)

        async def feed() -> None:
            for at in range(0, len(data), chunk):
                stream.feed_data(data[at:at + chunk])
                await asyncio.sleep(0)              # one chunk a loop turn, as a socket delivers them
        feeding = asyncio.ensure_future(feed())
        got = [await replies.read() for _ in range(count)]
        await feeding
        return got
    return asyncio.run(scene())


def _error(kind: type[Exception], text: str) -> Callable[[Any], bool]:
    return lambda reply: type(reply) is kind and str(reply) == text


# (the bytes, what they read as: a value, or a check of an error object)
VECTORS: list[tuple[bytes, Any]] = [
    (b"$5\r\nhello\r\n", "hello"), (b"$0\r\n\r\n", ""), (b"$-1\r\n", None), (b"*-1\r\n", None), (b":42\r\n", 42),
    (b":-7\r\n", -7), (b"+OK\r\n", "OK"), (b"$6\r\n\xc3\xa9\r\n\r\n\r\n", "é\r\n\r\n"),
    (b"-NOSCRIPT No matching script\r\n", _error(NoScriptError, "NOSCRIPT No matching script")),
    (b"-ERR The ID specified in XADD is equal or smaller\r\n",
     _error(ResponseError, "ERR The ID specified in XADD is equal or smaller")),
    (b"-OOM command not allowed\r\n", _error(ResponseError, "OOM command not allowed")),
    # RESP3 (a connection that said HELLO 3): null, booleans, double, map, set, verbatim string
    (b"_\r\n", None), (b"#t\r\n", True), (b"#f\r\n", False), (b",1.5\r\n", 1.5),
    (b"%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n", {"a": 1, "b": 2}), (b"~1\r\n+x\r\n", ["x"]), (b"=7\r\ntxt:\xc3\xa9t\r\n", "ét"),
]
NESTED = b"*3\r\n$1\r\na\r\n*2\r\n:1\r\n-ERR inner\r\n$-1\r\n"


def _check(got: Any, want: Any) -> None:
    if callable(want):
        assert want(got), got
    else:
        assert got == want and type(got) is type(want)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 16])
def test_every_reply_type_reads_whatever_the_chunks(chunk: int) -> None:
    got = _read_all(b"".join(data for data, _ in VECTORS) + NESTED, len(VECTORS) + 1, chunk)
    for reply, (_, want) in zip(got, VECTORS, strict=False):
        _check(reply, want)
    a, (one, inner), nil = got[-1]
    assert (a, one, nil) == ("a", 1, None)
    _check(inner, _error(ResponseError, "ERR inner"))             # an error inside an array: in its place


_values = st.recursive(
    st.none() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5), max_leaves=20)


def _encode(value: object) -> bytes:
    if value is None:
        return b"$-1\r\n"
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, str):
        return b"$%d\r\n%s\r\n" % (len(value.encode()), value.encode())
    assert isinstance(value, list)
    return b"*%d\r\n" % len(value) + b"".join(_encode(item) for item in value)


@settings(max_examples=150, deadline=None)
@given(st.lists(_values, min_size=1, max_size=6), st.integers(1, 9))
def test_any_nesting_of_replies_reads_back(values: list[object], chunk: int) -> None:
    assert _read_all(b"".join(_encode(v) for v in values), len(values), chunk) == values


def test_skip_consumes_the_expected_replies_or_nothing() -> None:
    ids = [b"3-1", b"3-2", b"3-3"]
    expect = b"".join(xadd_reply(i) for i in ids)

    async def scene() -> tuple[bool, list[Any], bool, list[Any]]:
        landed = _replies(expect + b"+OK\r\n")
        ok = await landed.skip(expect)
        after = [await landed.read()]
        refused = _replies(xadd_reply(b"3-1") + b"-ERR equal or smaller\r\n" + xadd_reply(b"3-3") + b":1\r\n")
        skipped = await refused.skip(expect)
        return ok, after, skipped, [await refused.read() for _ in range(4)]
    ok, after, skipped, replies = asyncio.run(scene())
    assert ok and after == ["OK"]
    assert not skipped and replies[0] == "3-1" and replies[2:] == ["3-3", 1]
    _check(replies[1], _error(ResponseError, "ERR equal or smaller"))


def test_skip_in_pieces_hands_what_follows_to_the_parse() -> None:
    expect = xadd_reply(b"3-1") + xadd_reply(b"3-2")
    assert _skip_then_read(expect + b"*2\r\n:1\r\n$2\r\nok\r\n", expect, 3) == (True, [[1, "ok"]])
    different = xadd_reply(b"3-1") + xadd_reply(b"3-20") + b":5\r\n"
    assert _skip_then_read(different, expect, 3) == (False, ["3-1", "3-20", 5])


def _skip_then_read(data: bytes, expect: bytes, chunk: int) -> tuple[bool, list[Any]]:
    async def scene() -> tuple[bool, list[Any]]:
        stream = asyncio.StreamReader()
        for at in range(0, len(data), chunk):
            stream.feed_data(data[at:at + chunk])
        stream.feed_eof()
        replies = Replies(stream)
        landed = await replies.skip(expect)
        got = []
        while True:
            try:
                got.append(await replies.read())
            except RedisConnectionError:
                return landed, got
    return asyncio.run(scene())


def test_skip_compares_nothing_while_the_parse_holds_bytes() -> None:
    """Bytes already handed to the parse come before any the skip would read: it says False, they are read."""
    expect = xadd_reply(b"3-1")

    async def scene() -> tuple[list[Any], bool, list[Any]]:
        replies = _replies(b":1\r\n" + expect)
        first = [await replies.read()]
        return first, await replies.skip(expect), [await replies.read()]
    assert asyncio.run(scene()) == ([1], False, ["3-1"])


@pytest.mark.parametrize("different", [b"-ERR refused\r\n", b"$-1\r\n", b"_\r\n", b"$4\r\n3-10\r\n"])
def test_skip_never_waits_for_bytes_a_different_reply_does_not_send(different: bytes) -> None:
    """The last append's reply differs and nothing follows it: ``skip`` answers False at once."""
    expect = xadd_reply(b"3-1") + xadd_reply(b"3-2")

    async def scene() -> bool:
        return await asyncio.wait_for(_replies(xadd_reply(b"3-1") + different).skip(expect), 1)
    assert asyncio.run(scene()) is False


def test_a_connection_closed_inside_a_reply_is_a_connection_error() -> None:
    async def scene() -> None:
        await _replies(b"*2\r\n$3\r\nab", eof=True).read()
    with pytest.raises(RedisConnectionError, match="^Connection closed by server.$"):
        asyncio.run(scene())

    async def skipping() -> None:
        await _replies(b"$3\r\n3-", eof=True).skip(xadd_reply(b"3-1"))
    with pytest.raises(RedisConnectionError, match="^Connection closed by server.$"):
        asyncio.run(skipping())


def test_bytes_that_are_not_resp_are_an_invalid_response_naming_them() -> None:
    async def scene() -> None:
        await _replies(b"?what\r\n").read()
    with pytest.raises(InvalidResponse, match='^Protocol error, got "\\?" as reply type byte$'):
        asyncio.run(scene())


def test_packing_is_resp_arrays_of_bulk_strings() -> None:
    assert pack(("EVALSHA", "ab", 1, b"k\r\n")) == b"*4\r\n$7\r\nEVALSHA\r\n$2\r\nab\r\n$1\r\n1\r\n$3\r\nk\r\n\r\n"
    assert pack_xadd(b"k", b"2-5", "é".encode()) == pack(("XADD", "k", "NOMKSTREAM", "2-5", "t", "é"))
    assert xadd_reply(b"2-5") == b"$3\r\n2-5\r\n"


def test_a_long_reply_in_many_pieces_reads_back_whole() -> None:
    items = [f"token {i}" for i in range(20_000)]
    assert _read_all(_encode([items, 7]), 1, 1000) == [[items, 7]]
