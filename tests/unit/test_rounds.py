"""A round's askers (``tokenwire.redislog.rounds``): a lane's one ``Then`` armed again, and an XADD's bytes."""

from __future__ import annotations

import pytest

pytest.importorskip("redis")      # rounds imports the redis extra's parser (hiredis) through resp

from tokenwire.redislog.resp import pack, pack_xadd, xadd_at, xadd_head, xadd_reply  # noqa: E402
from tokenwire.redislog.rounds import Then  # noqa: E402


def test_a_told_then_is_armed_again_for_the_next_call_and_an_untold_one_is_not() -> None:
    calls: list[tuple[str, BaseException | None]] = []
    first = Then(lambda error: calls.append(("first", error)))
    assert first.again(lambda error: calls.append(("x", error))) is not first      # in flight: a new one
    first.set_result(None)
    assert first.done() and first.exception() is None
    second = first.again(lambda error: calls.append(("second", error)))
    assert second is first and not second.done()                                   # told: armed again
    failure = RuntimeError("lease lost")
    second.set_exception(failure)
    assert second.done() and second.exception() is failure
    third = second.again(lambda error: calls.append(("third", error)))
    assert third.exception() is None and not third.done()
    assert calls == [("first", None), ("second", failure)]


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
        then = Then(bug)
        then.set_result(None)           # the round goes on: nothing raised here
        again = then.again(bug)
        again.set_exception(KeyError("gone"))
        assert again.done() and isinstance(again.exception(), KeyError)
        return seen

    seen = asyncio.run(tell())
    assert [c["message"] for c in seen] == ["an append's asker raised"] * 2
    assert [str(c["exception"]) for c in seen] == ["asker's bug, told None", "asker's bug, told KeyError('gone')"]
