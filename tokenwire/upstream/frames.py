"""An upstream's chat completion stream read: bytes in, the answer's text pieces out, no I/O.

How this works: ``UpstreamFrames.feed`` hands the bytes to tokenwire's SSE
``Decoder`` and reads each event's data as a ``chat.completion.chunk``: the
text of ``choices[0].delta.content`` is a token (an empty one, or a chunk
without it, such as the role chunk or a usage chunk, yields nothing);
``data: [DONE]`` ends the stream, and so does a chunk with a
``finish_reason`` (the ``[DONE]`` that follows is then taken and ignored).
Anything else fails clearly with one of ``UpstreamError``'s kinds, whose
name a reader sees in the stream's ``failed`` event: an ``{"error": ...}``
frame (what OpenAI-compatible servers send when they fail mid-stream) is
``UpstreamFailed``, a frame that is not such a chunk ``UpstreamMalformed``.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.sse import Decoder, SSEError

__all__ = ["UpstreamBroken", "UpstreamError", "UpstreamFailed", "UpstreamFrames", "UpstreamMalformed",
           "UpstreamRefused", "UpstreamStalled", "UpstreamStatus"]

# How much of a bad frame or an error body an error quotes.
QUOTE_CHARS = 120


class UpstreamError(Exception):
    """The upstream model server failed; the subclass says how (its name is what a reader's ``failed`` says)."""


class UpstreamRefused(UpstreamError):
    """The upstream could not be reached (refused, unresolvable, no connection within the connect timeout)."""


class UpstreamStatus(UpstreamError):
    """The upstream answered with an error status (4xx, 5xx)."""


class UpstreamStalled(UpstreamError):
    """The upstream sent nothing for longer than the read timeout."""


class UpstreamBroken(UpstreamError):
    """The connection to the upstream broke mid-answer, or ended before the answer did."""


class UpstreamMalformed(UpstreamError):
    """The upstream sent a frame that is not a chat completion chunk."""


class UpstreamFailed(UpstreamError):
    """The upstream sent an ``{"error": ...}`` frame mid-answer."""


def quote(text: str) -> str:
    """``text`` as an error quotes it: ``repr``, cut past ``QUOTE_CHARS``."""
    return repr(text) if len(text) <= QUOTE_CHARS else repr(text[:QUOTE_CHARS]) + "..."


class UpstreamFrames:
    """One upstream response's frames; ``done`` once its answer has ended.

    ``events``: how many events (frames with data) it has read; a comment
    (``: ping``) is none, so the relay's stall timer counts from the last one.
    """

    def __init__(self) -> None:
        self._decoder = Decoder()
        self.done = False
        self.events = 0

    def feed(self, chunk: bytes) -> list[str]:
        """The text pieces ``chunk`` completes; raises ``UpstreamMalformed``, ``UpstreamFailed``."""
        try:
            events = self._decoder.feed(chunk)
        except SSEError as exc:
            raise UpstreamMalformed(f"the upstream's event stream cannot be read: {exc}") from None
        self.events += len(events)
        pieces = []
        for event in events:
            if self.done:
                continue                      # after a finish_reason: [DONE], or a usage chunk
            piece = self._piece(event.data)
            if piece:
                pieces.append(piece)
        return pieces

    def _piece(self, data: str) -> str | None:
        if data.strip() == "[DONE]":
            self.done = True
            return None
        try:
            chunk: Any = json.loads(data)
        except ValueError:
            raise UpstreamMalformed(f"the upstream sent a frame that is not JSON: {quote(data)}") from None
        if isinstance(chunk, dict) and chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise UpstreamFailed(f"the upstream failed mid-answer: {quote(str(message))}")
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        if not isinstance(choices, list):
            raise UpstreamMalformed(f"the upstream sent a frame that is not a chat completion chunk: {quote(data)}")
        if not choices:
            return None                       # a usage chunk
        choice = choices[0]
        delta = choice.get("delta") if isinstance(choice, dict) else None
        content = delta.get("content") if isinstance(delta, dict) else None
        if content is not None and not isinstance(content, str):
            raise UpstreamMalformed(f"the upstream sent delta.content that is not a string: {quote(data)}")
        if isinstance(choice, dict) and choice.get("finish_reason"):
            self.done = True
        return content
