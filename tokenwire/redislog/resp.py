"""RESP on the log writer's connection: commands packed, and replies read, by the writer itself.

How this works: the writer sends a round as one write and reads its
replies from the connection's stream here.  redis-py's own packing and
per-reply parsing cost more than the round trip (tens of microseconds a
reply in Python); a round's appends are one ``XADD`` each, and their
replies, when every one landed, are exactly the entry ids the writer chose,
so ``Replies.skip`` compares the bytes that came with the bytes expected
(one comparison for the whole run of them) and only a round with a refusal
is parsed reply by reply.  ``Replies.read`` parses one reply of any RESP2 or
RESP3 type, as redis-py would with ``decode_responses``: an error reply is
returned as an exception object (``NoScriptError`` for ``NOSCRIPT``), not
raised, wherever it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

__all__ = ["Replies", "pack", "pack_xadd", "xadd_reply"]

_READ_BYTES = 1 << 16


def pack(args: Iterable[object]) -> bytes:
    """One command in RESP (an array of bulk strings)."""
    parts = []
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"*%d\r\n%s" % (len(parts), b"".join(parts))


def pack_xadd(key: bytes, entry: bytes, text: bytes) -> bytes:
    """``XADD key NOMKSTREAM entry t text``: an append that never makes a stream that expired."""
    return (b"*6\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$10\r\nNOMKSTREAM\r\n$%d\r\n%s\r\n$1\r\nt\r\n$%d\r\n%s\r\n"
            % (len(key), key, len(entry), entry, len(text), text))


def xadd_reply(entry: bytes) -> bytes:
    """What Redis answers an ``XADD`` that landed: the entry id, as a bulk string."""
    return b"$%d\r\n%s\r\n" % (len(entry), entry)


def _error(text: str) -> ResponseError:
    return NoScriptError(text) if text.startswith("NOSCRIPT") else ResponseError(text)


class _Frame:
    """An aggregate reply being read: its kind, the items so far, how many are still to come."""

    __slots__ = ("items", "kind", "left")

    def __init__(self, kind: bytes, left: int) -> None:
        self.kind, self.left = kind, left
        self.items: list[Any] = []

    def value(self) -> Any:
        if self.kind == b"%":
            return dict(zip(self.items[::2], self.items[1::2], strict=True))
        return self.items


_NEED = object()          # the buffer ends inside the next element


class Replies:
    """A buffered reader of replies on one connection's stream (``asyncio.StreamReader``)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream
        self.buf = b""
        self.pos = 0

    async def _fill(self) -> None:
        """Wait for more bytes (whatever has come, up to ``_READ_BYTES``); the consumed ones are dropped."""
        data = await self.stream.read(_READ_BYTES)
        if not data:
            raise RedisConnectionError("Connection closed by server.")
        self.buf, self.pos = self.buf[self.pos:] + data, 0

    async def skip(self, expected: bytes) -> bool:
        """True (and past them) if the next bytes are ``expected``; False (nothing consumed) at the first
        byte that differs.  Never waits for bytes a differing reply does not send: every reply that is not
        the one expected differs within its first two bytes."""
        size = len(expected)
        while True:
            have = len(self.buf) - self.pos
            if have >= size:
                if self.buf.startswith(expected, self.pos):
                    self.pos += size
                    return True
                return False
            if not expected.startswith(self.buf[self.pos:]):
                return False
            await self._fill()

    async def read(self) -> Any:
        """The next reply, parsed (an error reply as an exception object).

        The parse goes on from where the buffer ended (the aggregates read so far are kept), so a long
        reply arriving in many pieces is read once, not again from its start with each piece."""
        stack: list[_Frame] = []
        while True:
            value = self._element(stack)
            if value is not _NEED:
                return value
            await self._fill()

    def _element(self, stack: list[_Frame]) -> Any:
        """Parse elements until the reply is whole (returned) or the buffer ends (``_NEED``)."""
        while True:
            got = self._scalar()
            if got is _NEED:
                return _NEED
            if isinstance(got, _Frame):
                if got.left > 0:
                    stack.append(got)
                    continue
                got = got.value()
            while stack:
                top = stack[-1]
                top.items.append(got)
                top.left -= 1
                if top.left > 0:
                    break
                got = stack.pop().value()
            else:
                return got

    def _scalar(self) -> Any:
        """One element at ``pos``, consumed: a value, a ``_Frame`` for an aggregate header, or ``_NEED``."""
        end = self.buf.find(b"\r\n", self.pos)
        if end < 0:
            return _NEED
        kind, rest, at = self.buf[self.pos:self.pos + 1], self.buf[self.pos + 1:end], end + 2
        value: Any
        if kind == b"$" or kind == b"=" or kind == b"!":
            size = int(rest)
            if size < 0:
                value = None
            else:
                if len(self.buf) < at + size + 2:
                    return _NEED
                text = self.buf[at:at + size].decode()
                at += size + 2
                value = _error(text) if kind == b"!" else text[4:] if kind == b"=" else text
        elif kind == b"*" or kind == b"~" or kind == b">" or kind == b"%":
            count = int(rest)
            value = None if count < 0 else _Frame(kind, count * 2 if kind == b"%" else count)
        elif kind == b":" or kind == b"(":
            value = int(rest)
        elif kind == b"+":
            value = rest.decode()
        elif kind == b"-":
            value = _error(rest.decode())
        elif kind == b"_":
            value = None
        elif kind == b"#":
            value = rest == b"t"
        elif kind == b",":
            value = float(rest)
        else:
            raise RedisConnectionError(f"unexpected reply from Redis: {self.buf[self.pos:end][:40]!r}")
        self.pos = at
        return value
