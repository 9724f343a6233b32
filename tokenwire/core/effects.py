"""The effects a process yields (``TokenItem``, what travels through a channel, is in ``frames``).

How this works: producer, writer and client are generators written once.
They never sleep, block or touch a socket themselves; they yield one of these
requests and a driver performs it (the simulation on the virtual clock, or
the event loop in real time, in memory or over sockets) and sends the result
back in.  What each effect returns to the
process is written next to it.  Effects are plain (not frozen) slotted
dataclasses: one is made per step on the hot path, nothing keeps them, and a
frozen one costs three times as much to build.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from .frames import TokenItem

if TYPE_CHECKING:
    from .channel import BoundedChannel, Outcome, Taken

__all__ = ["TIMEOUT", "WRITE_FAILED", "Await", "Direct", "Effect", "Get", "LaterSteps", "Mailbox", "Process", "Put",
           "Run", "RunLogged", "Send", "Sleep", "Spawn", "Steps", "TokenItem"]


class Mailbox(Protocol):
    """What ``Put`` and ``Get`` act on: a stream's channel operations (``Stream`` is one).

    A protocol rather than ``Stream`` itself, so this module does not import
    the stream module that imports it.
    """

    channel: BoundedChannel[TokenItem] | None
    keep_trace: bool

    @property
    def changes(self) -> object: ...    # the stream's ``Changes`` (a driver checks it)

    def offer(self, item: TokenItem) -> Outcome: ...
    def hand_over(self, item: TokenItem) -> bool: ...
    def take(self, channel: BoundedChannel[TokenItem]) -> TokenItem | Taken: ...
    def note(self, t_ns: int, index: int, decision: str, waited_ns: int = 0) -> None: ...



@dataclass(slots=True)
class Sleep:
    """Let ``ns`` nanoseconds pass (the driver paces by deadline). Returns None."""

    ns: int


@dataclass(slots=True)
class Put:
    """Offer ``item`` to ``stream``'s current channel, waiting while a ``block`` channel is full.

    Returns the final ``Outcome``.
    """

    stream: Mailbox
    item: TokenItem


class Steps(Protocol):
    """A producer's model steps as ``Run`` has a driver take them: ``cost`` of making an index (ns), ``make`` it
    (generate, log, and the stream's bookkeeping of ``Stream.passing``), ``cancelled`` to stop before the next."""

    @property
    def cancelled(self) -> bool: ...

    def cost(self, index: int) -> int: ...
    def make(self, index: int) -> TokenItem: ...


@dataclass(slots=True)
class Run:
    """Take ``steps`` from ``index`` to ``end`` (excluded) as ``Sleep`` then ``Put`` each would, in the driver.

    Returns the next index to make: ``index`` itself when the driver made
    none (the simulation, for one: the process then yields the ``Sleep``
    and ``Put`` itself), less than ``end`` when ``steps`` were cancelled.
    A real-time driver runs a canned answer's tokens this way, one timer
    callback each instead of a generator's two resumptions and two
    effects; ``make``'s exception is raised inside the process.
    """

    stream: Mailbox
    steps: Steps
    index: int
    end: int


class LaterSteps(Protocol):
    """Steps a shared log makes later (``RunLogged``): ``start`` generates ``index`` and queues its append;
    ``done`` is called once the log holds it (with None, in the round that carried it) or with the error; then
    ``landed`` gives the token, its stream's bookkeeping done (``Stream.passing``)."""

    @property
    def cancelled(self) -> bool: ...

    def cost(self, index: int) -> int: ...
    def start(self, index: int, done: Callable[[BaseException | None], None]) -> None: ...
    def landed(self) -> TokenItem: ...


@dataclass(slots=True)
class RunLogged:
    """As ``Run``, for steps whose append is acknowledged later (``LaterSteps``): each token is offered once the
    log has it, and the next is timed from there, as a ``Sleep``, an ``Await`` of the append and a ``Put`` would
    be; a real-time driver takes them with no generator, future or loop turn in between.  ``start``'s or the
    log's exception is raised inside the process, whose ``index`` is then the one that failed."""

    stream: Mailbox
    steps: LaterSteps
    index: int
    end: int


class Direct(Protocol):
    """A writer a real-time driver may write a token for while it waits in ``Get`` (``connection``'s): ``frame``
    renders ``item`` (None: already sent), ``wrote`` counts it once the wire took it."""

    def frame(self, item: TokenItem) -> bytes | None: ...
    def wrote(self, item: TokenItem) -> None: ...


@dataclass(slots=True)
class Get:
    """Take from ``channel`` (one of ``stream``'s), waiting while it is empty.

    Returns a ``TokenItem`` or a ``Taken`` reason; ``TIMEOUT`` if ``timeout_ns``
    passed with nothing to take (real-time drivers only).  ``direct``: a
    real-time driver may write a caught-up token for the waiting writer
    itself (``Direct``), which goes on waiting; ``WRITE_FAILED`` if such a
    write found the peer gone.
    """

    stream: Mailbox
    channel: BoundedChannel[TokenItem]
    timeout_ns: int | None = None
    direct: Direct | None = None


@dataclass(slots=True)
class Send:
    """Write ``frame`` to the wire of the process that yields it. Returns True, or False when the peer is gone."""

    frame: bytes


@dataclass(slots=True)
class Spawn:
    """Start ``process`` alongside the caller. Returns None."""

    process: Process


@dataclass(slots=True)
class Await:
    """Wait for ``awaitable`` (a model's next token, a network call); real-time drivers only.

    Returns its result, or raises its exception inside the process.  The core
    never makes one itself: it is how an edge puts I/O of its own (an async
    iterator of tokens, an async client) into a process without blocking.
    """

    awaitable: Any


class _Timeout:
    def __repr__(self) -> str:
        return "TIMEOUT"


TIMEOUT: Final = _Timeout()


class _WriteFailed:
    def __repr__(self) -> str:
        return "WRITE_FAILED"


WRITE_FAILED: Final = _WriteFailed()

Effect = Sleep | Put | Get | Send | Spawn | Await | Run | RunLogged
Process = Generator[Effect, Any, Any]
