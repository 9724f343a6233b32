"""What one round of the log writer carries: queued commands and appends, and how their askers are told.

How this works: an asker gets a future when it queues a ``Command`` or an
``Append``, or, for an append, names a call (``Then``: a producer's lane,
told in the round itself rather than a loop turn later, with no future made
per token); ``settle`` answers it (once: an asker that gave up is told
nothing).  ``Appends`` turns a round's appends into what goes on the wire:
a plain ``XADD`` for each append of a stream this instance owns, fenced by
the epoch of its claim, with the replies expected if all of them land, and a
checked ``APPEND_ONE`` call for each append of a stream it holds no claim
for (``scripts`` says what each does).  ``RoundFigures`` is what the
writer's rounds add up to for ``/metrics``: each round's time, and the
appends Redis took.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from ..core.buckets import Buckets
from .replies import entry_id
from .resp import pack, xadd_at, xadd_head

__all__ = ["ASKING", "LOG_ROUND_BUCKETS", "Append", "Appends", "Command", "Parse", "RoundFigures", "Settles", "Then",
           "logged", "settle"]

# The buckets of a round's time (``tokenwire_log_round_seconds``), in seconds: one pipelined round trip is
# well under a millisecond on a LAN when all is well, and is held back by a loaded Redis or process up to
# the writer's stall timeout (10 s): 100 us to 10 s.
LOG_ROUND_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                     2.5, 5.0, 10.0)

Parse = Callable[[Any], Any]

# What goes before a call an ASK redirected: the target node takes the next command on a slot it imports.
ASKING = pack(("ASKING",))


class Command:
    __slots__ = ("args", "asking", "future", "node", "parse", "redirects", "tries")

    def __init__(self, args: tuple[object, ...], future: asyncio.Future[Any], parse: Parse | None,
                 node: str | None = None) -> None:
        self.args, self.future, self.parse, self.tries = args, future, parse, 0
        self.node = node                # the node it must go to (a client id's), None: its key's
        self.asking: str | None = None  # the node an ASK sent it to: sent there once, after ASKING
        self.redirects = 0              # MOVED, ASK and TRYAGAIN replies it got


class Settles(Protocol):
    """What an append's asker is told through: an ``asyncio.Future``, or a ``Then``."""

    def done(self) -> bool: ...
    def cancelled(self) -> bool: ...
    def exception(self) -> BaseException | None: ...
    def set_result(self, result: None, /) -> None: ...
    def set_exception(self, exception: BaseException, /) -> None: ...


class Then:
    """An append's asker told by a call, at once: ``call(None)`` once it landed, ``call(error)`` if not.  An
    error the call raises goes to the loop's exception handler, never into the round.  One an append, never
    armed again: a round looks at a refused append's ``Then`` again after telling it (``logged``)."""

    __slots__ = ("_call", "_done", "_error")

    def __init__(self, call: Callable[[BaseException | None], None]) -> None:
        self._call, self._done = call, False
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return False

    def exception(self) -> BaseException | None:
        return self._error

    def set_result(self, result: None, /) -> None:
        self._done = True
        try:
            self._call(None)
        except Exception as exc:  # noqa: BLE001 - the asker's bug: reported, and the round's other askers told
            _raised(exc)

    def set_exception(self, exception: BaseException, /) -> None:
        self._done, self._error = True, exception
        try:
            self._call(exception)
        except Exception as exc:  # noqa: BLE001 - as set_result's
            _raised(exc)


def _raised(exc: Exception) -> None:
    asyncio.get_running_loop().call_exception_handler({"message": "an append's asker raised", "exception": exc})


class Append:
    __slots__ = ("asking", "data", "entry", "future", "head", "index", "keys", "redirects", "stream_id", "token",
                 "tries")

    def __init__(self, stream_id: str, keys: tuple[str, str, str], index: int, token: str,
                 future: Settles, head: bytes = b"") -> None:
        self.stream_id, self.keys, self.index, self.token, self.future = stream_id, keys, index, token, future
        self.data = token.encode()      # here, so a token UTF-8 cannot encode is its asker's error, not the round's
        self.head = head or xadd_head(keys[1].encode())     # its XADD's start (``head``: the stream's, made once)
        self.tries = 0
        self.entry = b""                # the entry id its XADD asked for (the epoch is the round's)
        self.asking: str | None = None  # as a Command's
        self.redirects = 0


class Appends:
    """A round's appends as they go out: the owned streams' ``XADD``s and the replies they get if all land,
    and a checked ``APPEND_ONE`` call for each of the others.  Which is which is decided when the round is
    made, per stream, so one stream's appends in a round take one path, in their order."""

    __slots__ = ("asking", "expect", "fast", "slow", "slow_calls", "xadds")

    def __init__(self, appends: list[Append], owned: dict[str, int], owner_id: str, maxlen: int, sha: str) -> None:
        self.fast = [a for a in appends if a.stream_id in owned]
        self.slow = [a for a in appends if a.stream_id not in owned] if len(self.fast) < len(appends) else []
        xadds, expect = [], []
        for a in self.fast:
            entry = a.entry = entry_id(owned[a.stream_id], a.index)
            if a.asking is not None:        # its key is being migrated to this node: ASKING lets it in
                xadds.append(ASKING)
                expect.append(b"+OK\r\n")
            xadd, landed = xadd_at(a.head, entry, a.data)
            xadds.append(xadd)
            expect.append(landed)
        self.xadds, self.expect = b"".join(xadds), b"".join(expect)
        self.asking = [a.asking is not None for a in self.fast]
        self.slow_calls = [("EVALSHA", sha, 3, *a.keys, owner_id, a.index, a.data, maxlen) for a in self.slow]


def settle(future: asyncio.Future[Any] | Settles, value: Any = None, error: BaseException | None = None) -> None:
    if future.done():
        return                      # its asker gave up (a request's timeout): the answer goes nowhere
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


class RoundFigures:
    """What a writer's rounds add up to: each round's time (``times``) and the appends Redis took (``appended``)."""

    __slots__ = ("appended", "times")

    def __init__(self) -> None:
        self.appended = 0
        self.times = Buckets(LOG_ROUND_BUCKETS)

    def count(self, landed: int, seconds: float) -> None:
        """Count one round of ``seconds`` whose ``landed`` appends Redis took."""
        self.times.observe_ns(round(seconds * 1e9))
        self.appended += landed


def logged(appends: list[Append], added: list[Any] | None, moved: list[Append]) -> int:
    """Tell each of ``appends`` (a round's owned ones) it is logged, but those ``moved`` (sent again) and those
    told their refusal already; ``added``: their replies (None: all landed, the replies were the bytes
    expected).  Returns how many Redis holds: an entry id for a reply, or found logged since (``REFUSED``)."""
    if added is None:
        for a in appends:
            future = a.future
            if not future.done():       # ``settle``'s test, a call fewer per token
                future.set_result(None)
        return len(appends)
    again, landed = {id(a) for a in moved}, 0
    for a, reply in zip(appends, added, strict=True):
        if id(a) in again:
            continue
        settle(a.future)            # a refused one was told its error already: settle tells nobody twice
        future = a.future
        landed += isinstance(reply, str) or (not future.cancelled() and future.exception() is None)
    return landed
