"""An upstream's chat completion stream read: bytes in, the answer's parts out, no I/O.

How this works: ``UpstreamFrames.feed`` hands the bytes to tokenwire's SSE
``Decoder`` and reads each event's data as a ``chat.completion.chunk``, whose
parts ``models.openai_chat.ChunkParts`` reads: text, reasoning (vLLM's
``delta.reasoning``, SGLang's ``reasoning_content``), a refusal, tool calls
by index, the finish reason, and the usage chunk (an empty chunk, such as
the role chunk, yields nothing).  ``data: [DONE]`` ends the stream, and so
does the usage chunk after the ``finish_reason`` (what follows is taken and
ignored); an upstream that closes its stream after the ``finish_reason``
has ended its answer too (``finished``).  Anything else fails clearly with
one of ``UpstreamError``'s kinds, whose name a reader sees in the stream's
``failed`` event: an ``{"error": ...}`` frame (what OpenAI-compatible
servers send when they fail mid-stream) is ``UpstreamFailed``, a frame that
is not such a chunk, or a part that cannot be one (a choice other than the
first, a tool call's arguments that are not JSON), ``UpstreamMalformed``.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.parts import Part, PartError
from ..core.sse import Decoder, SSEError
from ..models import ModelFailure
from ..models.openai_chat import ChunkParts

__all__ = ["UpstreamBroken", "UpstreamError", "UpstreamFailed", "UpstreamFrames", "UpstreamMalformed",
           "UpstreamRefused", "UpstreamStalled", "UpstreamStatus"]

# How much of a bad frame or an error body an error quotes.
QUOTE_CHARS = 120


class UpstreamError(ModelFailure):
    """The upstream model server failed; the subclass says how (its name is what a reader's ``failed`` says, its
    message the one line the proxy logs)."""


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
    """One upstream response's frames; ``done`` once its answer has ended, ``finished`` once its finish came.

    ``events``: how many events (frames with data) it has read; a comment
    (``: ping``) is none, so the relay's stall timer counts from the last one.
    """

    def __init__(self) -> None:
        self._decoder = Decoder()
        self._parts = ChunkParts()
        self.done = False
        self.events = 0

    def feed(self, chunk: bytes) -> list[str | Part]:
        """The parts ``chunk`` completes; raises ``UpstreamMalformed``, ``UpstreamFailed``."""
        try:
            events = self._decoder.feed(chunk)
        except SSEError as exc:
            raise UpstreamMalformed(f"the upstream's event stream cannot be read: {exc}") from None
        self.events += len(events)
        parts: list[str | Part] = []
        for event in events:
            if not self.done:                 # after the answer's end: nothing more is read
                parts += self._read(event.data)
        return parts

    def close(self) -> list[Part]:
        """The parts the stream's end completes (a call still open, a usage sent before the finish)."""
        try:
            return self._parts.close()
        except PartError as exc:
            raise UpstreamMalformed(f"the upstream sent a malformed part: {exc}") from None

    def _read(self, data: str) -> list[str | Part]:
        if data.strip() == "[DONE]":
            self.done = True
            return list(self.close())
        try:
            chunk: Any = json.loads(data)
        except ValueError:
            raise UpstreamMalformed(f"the upstream sent a frame that is not JSON: {quote(data)}") from None
        if isinstance(chunk, dict) and chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise UpstreamFailed(f"the upstream failed mid-answer: {quote(str(message))}")
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
            raise UpstreamMalformed(f"the upstream sent a frame that is not a chat completion chunk: {quote(data)}")
        try:
            parts = self._parts.feed(chunk)
        except PartError as exc:
            raise UpstreamMalformed(f"the upstream sent a malformed part: {exc}") from None
        if not chunk["choices"] and chunk.get("usage") is not None and self._parts.finished:
            self.done = True                  # the usage chunk after the finish: the answer is whole
            parts += self.close()
        return parts

    @property
    def finished(self) -> bool:
        """True once the answer's ``finish_reason`` came: a stream that ends after it has ended its answer."""
        return self._parts.finished
