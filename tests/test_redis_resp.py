"""The log writer's own RESP reading (``tokenwire.redislog.resp``), without a server: bytes in, replies out.

What is asserted: every RESP2 and RESP3 reply type parses as redis-py gives it with ``decode_responses``
(errors as exception objects, ``NOSCRIPT`` as ``NoScriptError``), whatever the chunks the bytes arrive in;
``skip`` consumes the expected bytes or nothing, and never waits for bytes a differing reply does not send.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

from tokenwire.redislog.resp import Replies, pack, pack_xadd, xadd_reply


def _replies(*chunks: bytes, eof: bool = False) -> Replies:
    stream = asyncio.StreamReader()
    for chunk in chunks:
        stream.feed_data(chunk)
    if eof:
        stream.feed_eof()
    return Replies(stream)


def _read_all(data: bytes, count: int, chunk: int) -> list[object]:
    async def scene() -> list[object]:
        stream = asyncio.StreamReader()
        replies = Replies(stream)

        async def feed() -> None:
            for at in range(0, len(data), chunk):
                stream.feed_data(data[at:at + chunk])
                await asyncio.sleep(0)
        feeding = asyncio.ensure_future(feed())
        got = [await replies.read() for _ in range(count)]
        await feeding
        return got
    return asyncio.run(scene())


WIRE = (b"$5\r\nhello\r\n" b"$0\r\n\r\n" b"$-1\r\n" b"*-1\r\n" b":42\r\n" b":-7\r\n" b"+OK\r\n"
        b"*3\r\n$1\r\na\r\n*2\r\n:1\r\n-ERR inner\r\n$-1\r\n" b"-NOSCRIPT No matching script\r\n"
        b"-ERR The ID specified in XADD is equal or smaller\r\n" b"_\r\n" b"#t\r\n" b"#f\r\n" b",1.5\r\n"
        b"(12345678901234567890\r\n" b"%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n" b"~1\r\n+x\r\n" b"=7\r\ntxt:\xc3\xa9t\r\n"
        b"!5\r\nERR x\r\n" b"$6\r\n\xc3\xa9\r\n\r\n\r\n")


def _check(got: list[object]) -> None:
    assert got[:7] == ["hello", "", None, None, 42, -7, "OK"]
    assert got[7][0] == "a" and got[7][1][0] == 1 and got[7][2] is None
    assert type(got[7][1][1]) is ResponseError and str(got[7][1][1]) == "ERR inner"
    assert isinstance(got[8], NoScriptError)
    assert type(got[9]) is ResponseError and "equal or smaller" in str(got[9])
    assert got[10:16] == [None, True, False, 1.5, 12345678901234567890, {"a": 1, "b": 2}]
    assert got[16:18] == [["x"], "ét"]
    assert type(got[18]) is ResponseError and str(got[18]) == "ERR x"
    assert got[19] == "é\r\n\r\n"                         # a bulk string holding CR LF is read by its length


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 16])
def test_every_reply_type_parses_whatever_the_chunks(chunk):
    _check(_read_all(WIRE, 20, chunk))


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
def test_any_nesting_of_replies_reads_back(values, chunk):
    assert _read_all(b"".join(_encode(v) for v in values), len(values), chunk) == values


def test_skip_consumes_the_expected_replies_or_nothing():
    ids = [b"3-1", b"3-2", b"3-3"]
    expect = b"".join(xadd_reply(i) for i in ids)

    async def scene() -> tuple[bool, list[object], bool, list[object]]:
        landed = _replies(expect + b"+OK\r\n")
        ok = await landed.skip(expect)
        after = [await landed.read()]
        refused = _replies(xadd_reply(b"3-1") + b"-ERR equal or smaller\r\n" + xadd_reply(b"3-3") + b":1\r\n")
        skipped = await refused.skip(expect)
        return ok, after, skipped, [await refused.read() for _ in range(4)]
    ok, after, skipped, replies = asyncio.run(scene())
    assert ok and after == ["OK"]
    assert not skipped and replies[0] == "3-1" and isinstance(replies[1], ResponseError) and replies[2:] == ["3-3", 1]


@pytest.mark.parametrize("different", [b"-ERR refused\r\n", b"$-1\r\n", b"_\r\n", b"$4\r\n3-10\r\n"])
def test_skip_never_waits_for_bytes_a_different_reply_does_not_send(different):
    """The last append's reply differs and nothing follows it: ``skip`` answers False at once."""
    expect = xadd_reply(b"3-1") + xadd_reply(b"3-2")

    async def scene() -> bool:
        return await asyncio.wait_for(_replies(xadd_reply(b"3-1") + different).skip(expect), 1)
    assert asyncio.run(scene()) is False


def test_a_connection_closed_inside_a_reply_is_a_connection_error():
    async def scene() -> None:
        await _replies(b"*2\r\n$3\r\nab", eof=True).read()
    with pytest.raises(RedisConnectionError):
        asyncio.run(scene())

    async def skipping() -> None:
        await _replies(b"$3\r\n3-", eof=True).skip(xadd_reply(b"3-1"))
    with pytest.raises(RedisConnectionError):
        asyncio.run(skipping())


def test_an_unknown_reply_type_is_a_connection_error_naming_it():
    async def scene() -> None:
        await _replies(b"?what\r\n").read()
    with pytest.raises(RedisConnectionError, match="unexpected reply from Redis: b'\\?what'"):
        asyncio.run(scene())


def test_packing_is_resp_arrays_of_bulk_strings():
    assert pack(("EVALSHA", "ab", 1, b"k\r\n")) == b"*4\r\n$7\r\nEVALSHA\r\n$2\r\nab\r\n$1\r\n1\r\n$3\r\nk\r\n\r\n"
    assert pack_xadd(b"k", b"2-5", "é".encode()) == pack(("XADD", "k", "NOMKSTREAM", "2-5", "t", "é"))
    assert xadd_reply(b"2-5") == b"$3\r\n2-5\r\n"


def test_a_long_reply_in_many_pieces_is_parsed_once(monkeypatch):
    """Each piece continues the parse where the last ended: elements parsed = elements + one per piece."""
    calls = [0]
    scalar = Replies._scalar

    def counted(self: Replies) -> object:
        calls[0] += 1
        return scalar(self)
    monkeypatch.setattr(Replies, "_scalar", counted)
    items = [f"token {i}" for i in range(20_000)]
    data = _encode([items, 7])
    chunk = 1000
    assert _read_all(data, 1, chunk) == [[items, 7]]
    pieces = -(-len(data) // chunk)
    assert calls[0] <= 2 + len(items) + 1 + pieces
