"""RESP on the log writer's connection: commands packed by the writer, replies parsed by hiredis.

How this works: the writer sends a round as one write and reads its
replies from the connection's stream here.  redis-py's pipeline costs more
than the round trip (its per-reply timeout context, its raising on the
first error reply), so the writer packs the commands itself, and hands the
bytes that come back to hiredis's ``Reader`` (``feed``/``gets``, as
redis-py's own ``_parsers/hiredis.py`` does) to parse in C.  A round's
appends are one ``XADD`` each, and their replies, when every one landed,
are exactly the entry ids the writer chose, so ``Replies.skip`` compares the
bytes that came with the bytes expected (one comparison for the whole run
of them) before any parsing; only a round with a refusal is parsed reply by
reply.  Replies come as redis-py gives them with ``decode_responses``
(RESP2, or RESP3 on a connection that asked for it): an error reply is an
exception object in its place (``NoScriptError`` for ``NOSCRIPT``,
``MovedError``/``AskError`` for a cluster's redirection, ``ReadOnlyError``
for a replica's ``READONLY``), never
raised, wherever it is; bytes that are not RESP raise ``InvalidResponse``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import hiredis
from redis.exceptions import (
    AskError,
    InvalidResponse,
    MovedError,
    NoScriptError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

__all__ = ["Replies", "pack", "pack_xadd", "xadd_at", "xadd_head", "xadd_reply"]

# Bytes taken from the stream at a time: a 1,000-entry resume read (~30 KB) comes in one or two.
_READ_BYTES = 1 << 16
# The error replies of a cluster sending a call elsewhere or again, as redis-py's exceptions (which read the
# slot and the node from the text).
_CLUSTER_ERRORS: dict[str, type[ResponseError]] = {"MOVED": MovedError, "ASK": AskError, "TRYAGAIN": TryAgainError}
# What hiredis's ``gets`` returns while the next reply is incomplete (None and False are replies).
_NEED = object()


def pack(args: Iterable[object]) -> bytes:
    """One command in RESP (an array of bulk strings)."""
    parts = []
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"*%d\r\n%s" % (len(parts), b"".join(parts))


def pack_xadd(key: bytes, entry: bytes, text: bytes) -> bytes:
    """``XADD key NOMKSTREAM entry t text``: an append that never makes a stream that expired."""
    return xadd_at(xadd_head(key), entry, text)[0]


def xadd_head(key: bytes) -> bytes:
    """What every ``XADD`` to ``key`` starts with (made once a stream by its owner's lane)."""
    return b"*6\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$10\r\nNOMKSTREAM\r\n" % (len(key), key)


def xadd_at(head: bytes, entry: bytes, text: bytes) -> tuple[bytes, bytes]:
    """``pack_xadd`` from its ``xadd_head``, and what Redis answers when it lands (``xadd_reply``): the
    command carries the very bytes of that answer, its entry id as a bulk string.  One call a token."""
    reply = b"$%d\r\n%s\r\n" % (len(entry), entry)
    return b"%s%s$1\r\nt\r\n$%d\r\n%s\r\n" % (head, reply, len(text), text), reply


def xadd_reply(entry: bytes) -> bytes:
    """What Redis answers an ``XADD`` that landed: the entry id, as a bulk string."""
    return b"$%d\r\n%s\r\n" % (len(entry), entry)


def _error(text: str) -> ResponseError:
    """An error reply as an object (hiredis's ``replyError``): its whole text, ``NoScriptError`` for ``NOSCRIPT``,
    and a cluster's redirections as redis-py reads them (``MovedError``, ``AskError``, ``TryAgainError``)."""
    code, _, rest = text.partition(" ")
    redirection = _CLUSTER_ERRORS.get(code)
    if redirection is not None:
        return redirection(rest)            # as redis-py's parser makes them: the text after the code
    if code == "READONLY":
        return ReadOnlyError(text)          # a replica's refusal: the node was demoted (links drops it)
    return NoScriptError(text) if text.startswith("NOSCRIPT") else ResponseError(text)


class Replies:
    """The replies on one connection's stream (``asyncio.StreamReader``), parsed by one ``hiredis.Reader``."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream
        self.reader = hiredis.Reader(protocolError=InvalidResponse, replyError=_error, encoding="utf-8",
                                     notEnoughData=_NEED)

    async def _more(self) -> bytes:
        """Wait for more bytes (whatever has come, up to ``_READ_BYTES``)."""
        data = await self.stream.read(_READ_BYTES)
        if not data:
            raise RedisConnectionError("Connection closed by server.")
        return data

    async def skip(self, expected: bytes) -> bool:
        """True (and past them) if the next bytes are ``expected``; False (nothing consumed) at the first
        byte that differs.  Never waits for bytes a differing reply does not send: every reply that is not
        the one expected differs within its first two bytes.  The bytes read past what is compared go to
        the reader, in order."""
        if self.reader.has_data():
            return False                # bytes already with the reader come first: parse them
        held = b""
        while len(held) < len(expected) and expected.startswith(held):
            held += await self._more()
        landed = held.startswith(expected)
        rest = held[len(expected):] if landed else held
        if rest:
            self.reader.feed(rest)
        return landed

    async def read(self) -> Any:
        """The next reply, parsed (an error reply as an exception object)."""
        reply = self.reader.gets()
        while reply is _NEED:
            self.reader.feed(await self._more())
            reply = self.reader.gets()
        return reply
