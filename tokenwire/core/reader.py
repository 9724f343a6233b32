"""The in-memory wire and the reader at its far end.

How this works: a ``Wire`` is what a ``Send`` effect writes to.  It says when
it can next accept a frame (``ready_at``) and takes it (``deliver``), which
returns False when the peer is gone.  ``MemoryReader`` is a wire with no
buffer of its own: it decodes every frame with the project's ``Decoder`` at
the moment it is delivered, records when each token arrived, and is then
busy for ``reader_ns`` per token, so the writer cannot hand it the next frame
before that.  In memory the channel is therefore the only queue, which is
what the report wants to show; over TCP the kernel's buffers add another
(the socket server reports those).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .sse import Decoder, Event

__all__ = ["MemoryReader", "Wire"]


class Wire(Protocol):
    def ready_at(self) -> int: ...
    def deliver(self, frame: bytes, now: int) -> bool: ...


@dataclass(slots=True)
class MemoryReader:
    """A reader that takes ``reader_ns`` per token and may hang up after ``hang_up_after`` tokens.

    ``hang_up_after=0`` hangs up as soon as the ``open`` frame arrives.  The
    hang-up happens once, on the first connection that reaches that
    count; ``frames`` keeps every byte delivered, per connection.
    """

    reader_ns: int = 0
    hang_up_after: int | None = None
    arrivals: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    frames: list[list[bytes]] = field(default_factory=list)
    last_event_id: str = ""
    free_at: int = 0
    hung_up: bool = False
    done_at: int | None = None
    hung_up_at: int | None = None
    _decoder: Decoder = field(default_factory=Decoder)

    def begin_connection(self) -> None:
        """A new connection: a fresh decoder (as a reconnecting EventSource has), the last id kept."""
        self._decoder = Decoder()
        self.frames.append([])

    @property
    def cursor(self) -> int:
        """The resume cursor: the last event id as an int, -1 before any."""
        return int(self.last_event_id) if self.last_event_id else -1

    def ready_at(self) -> int:
        return self.free_at

    def deliver(self, frame: bytes, now: int) -> bool:
        """Decode ``frame`` at ``now``; returns False once the reader hangs up."""
        if not self.frames:
            self.begin_connection()
        self.frames[-1].append(frame)
        for event in self._decoder.feed(frame):
            self.events.append(event)
            self.last_event_id = self._decoder.last_event_id
            if event.event == "done":
                self.done_at = now
            elif event.event == "open" and self.hang_up_after == 0 and not self.hung_up:
                self.hung_up, self.hung_up_at = True, now  # dies before the first token: no Last-Event-ID
                return False
            elif event.event == "token":
                self.arrivals.append(now)
                self.ids.append(int(event.id))
                self.texts.append(event.data)
                self.free_at = now + self.reader_ns
                if not self.hung_up and len(self.ids) == self.hang_up_after:
                    self.hung_up, self.hung_up_at = True, now
                    return False
        return True
