"""How a stream goes on the wire: one ``Rendering`` per connection, tokenwire's own frames by default.

How this works: a stream is one thing, indexed tokens in a log plus an
ending; what a connection sends is a rendering of it that its route picks.
A stream's writer (``Stream.serve``) asks its rendering for the bytes of
the connection's opening, of each token and of the end, and sends them.
``FRAMES`` is tokenwire's own (``open`` with ``retry``, one ``token`` frame
per token, the stream's closing frame); the AI SDK's UI message chunks are
``tokenwire.endpoints.ui_stream.ChatFrames``.  The writer only calls these:
resume, stop and continuation are decided below any rendering.
"""

from __future__ import annotations

from typing import Protocol

from .channel import Policy
from .endings import EarlyEnd
from .frames import TokenItem, entry_frame, open_frame

__all__ = ["FRAMES", "Rendered", "Rendering", "TokenwireFrames"]


class Rendered(Protocol):
    """What a rendering reads of the stream (``Stream`` is one): its id, settings, length and ending."""

    stream_id: str
    policy: Policy
    capacity: int
    retry_ms: int
    total: int
    ending: EarlyEnd | None

    def closing_frame(self, delivered_from: int, dropped: int) -> bytes: ...


class Rendering(Protocol):
    """What one connection puts on the wire: the bytes of its opening (empty: nothing), of each token, of its end."""

    def opening(self, stream: Rendered, cursor: int) -> bytes: ...
    def token(self, item: TokenItem) -> bytes: ...
    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes: ...


class TokenwireFrames:
    """tokenwire's own frames: ``open`` (with ``retry``), one ``token`` per token, the stream's closing frame."""

    def opening(self, stream: Rendered, cursor: int) -> bytes:
        return open_frame(stream.stream_id, resumed=cursor >= 0, start_index=cursor + 1,
                          policy=stream.policy.value, buffer=stream.capacity, retry_ms=stream.retry_ms)

    token = staticmethod(entry_frame)      # the frame itself, with no call around it: one per token

    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes:
        return stream.closing_frame(delivered_from, dropped)


FRAMES = TokenwireFrames()
