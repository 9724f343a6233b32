"""A round's askers (``tokenwire.redislog.rounds``): a ``Then`` told by a call, and an XADD's bytes."""

from __future__ import annotations

import pytest

pytest.importorskip("redis")      # rounds imports the redis extra's parser (hiredis) through resp

from tokenwire.redislog.resp import pack, pack_xadd, xadd_at, xadd_head, xadd_reply  # noqa: E402
from tokenwire.redislog.rounds import Then  # noqa: E402


def test_a_then_is_told_once_with_what_the_round_found() -> None:
    calls: list[BaseException | None] = []
    landed, refused = Then(calls.append), Then(calls.append)
    assert not landed.done() and not landed.cancelled()
    landed.set_result(None)
    failure = RuntimeError("lease lost")
    refused.set_exception(failure)
    assert landed.done() and landed.exception() is None
    assert refused.done() and refused.exception() is failure      # what ``logged`` reads again after the round
    assert calls == [None, failure]


@pytest.mark.parametrize("text", [b"", b"t", "h\u00e9llo\r\n".encode(), b"x" * 100_000])
def test_xadd_at_is_the_packed_xadd_and_the_reply_redis_gives(text: bytes) -> None:
    key, entry = b"tokenwire:{s}:tokens", b"7-123456789"
    command, reply = xadd_at(xadd_head(key), entry, text)
    assert command == pack((b"XADD", key, b"NOMKSTREAM", entry, b"t", text)) == pack_xadd(key, entry, text)
    assert reply == xadd_reply(entry) == b"$11\r\n7-123456789\r\n"


def test_a_then_whose_call_raises_reports_it_to_the_loop_and_counts_as_told() -> None:
    import asyncio

    def bug(error: BaseException | None) -> None:
        raise ValueError(f"asker's bug, told {error!r}")

    async def tell() -> list[dict[str, object]]:
        seen: list[dict[str, object]] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: seen.append(context))
        Then(bug).set_result(None)      # the round goes on: nothing raised here
        refused = Then(bug)
        refused.set_exception(KeyError("gone"))
        assert refused.done() and isinstance(refused.exception(), KeyError)
        return seen

    seen = asyncio.run(tell())
    assert [c["message"] for c in seen] == ["an append's asker raised"] * 2
    assert [str(c["exception"]) for c in seen] == ["asker's bug, told None", "asker's bug, told KeyError('gone')"]
