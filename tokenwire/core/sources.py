"""What fills a stream's log: the ``Source`` hooks a ``Stream`` calls, and the canned answer (``Canned``).

How this works: a ``Stream`` holds the connections; its source holds what
makes the tokens and says what the stream does at each turn: ``produce``
is the producer process (from index ``start`` to the end), ``joined`` and
``left`` hear that a reader attached, or that the last reader here left,
``stop_generating`` that someone asked it to stop for good, ``shut_down``
that the server is going away, ``release`` that the stream is forgotten
here, and ``at_creation`` gives a producer to run before anyone reads (your
model on a shared log is generated from its creation on).  The hooks take
the stream as ``Fed``: what a source may read of it, and the methods by
which it changes it (a source sets none of its state directly).
``Source`` is the base with what most sources do: a reader leaving with
``on_disconnect="cancel"`` cancels the producer, the rest does nothing.

``Canned`` is the seeded canned answer on a log read with plain calls (in
memory): each index costs a model step (``Sleep``), is appended, and passed
on.  The same on a shared log is ``redislog.streams.SharedCanned``; your own
model is ``asgi.model_stream.ModelTokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Protocol

from .effects import Mailbox, Process, Put, Run, Sleep
from .endings import EarlyEnd, ending_state, failed, raised
from .frames import TokenItem, new_item
from .model import Model
from .tokenlog import LogError, StreamState, TokenLog

__all__ = ["Canned", "CannedSteps", "Fed", "OnDisconnect", "Source"]


class OnDisconnect(StrEnum):
    """What the last reader leaving does: ``cancel`` the producer, or ``detach`` (it goes on filling the log)."""

    CANCEL = "cancel"
    DETACH = "detach"


class Fed(Mailbox, Protocol):
    """What a source reads and changes of its stream (``Stream`` is one): these, the ``Mailbox`` its tokens are
    put to, and nothing private."""

    @property
    def stream_id(self) -> str: ...
    @property
    def log(self) -> TokenLog: ...
    @property
    def total(self) -> int: ...             # the answer's length, or the most it may have until it ends
    @property
    def on_disconnect(self) -> OnDisconnect: ...
    @property
    def producer_running(self) -> bool: ...
    @property
    def cancelled(self) -> bool: ...        # the producer is to stop before its next token
    @property
    def stopping(self) -> bool: ...         # asked to stop for good
    @property
    def offered(self) -> int: ...           # the last index offered to readers here
    @property
    def ending(self) -> EarlyEnd | None: ...

    def cancel(self) -> None: ...
    def idle(self) -> None: ...
    def pass_on(self, item: TokenItem) -> Put: ...
    def passing(self, item: TokenItem) -> None: ...
    def ended(self, total: int, ending: EarlyEnd | None = None) -> None: ...
    def stopped_at(self, total: int) -> None: ...
    def lose(self, reached: int) -> None: ...
    def abandon(self, failure: Exception | None = None) -> None: ...
    def wake(self) -> None: ...
    def unread(self) -> bool: ...


class Source:
    """What fills a stream's log, and what its stream does at each turn; see the module.

    ``length``: how many tokens the answer has, or the most it may have
    while that is not known.  ``steps``: model steps paid per index (a
    canned model counts them; others keep none).
    """

    length: int = 0

    @property
    def steps(self) -> Mapping[int, int]:
        return {}

    def produce(self, stream: Fed, start: int) -> Process:
        """The producer: fill the log from index ``start`` and pass each token on (``Stream.pass_on``)."""
        raise NotImplementedError

    def joined(self, stream: Fed) -> None:
        """A reader attached to ``stream`` here."""

    def left(self, stream: Fed, cancel: bool) -> None:
        """The last reader here left (``cancel=False``: it is back at once); ``cancel`` cancels the producer."""
        if cancel and (stream.stopping or stream.on_disconnect is OnDisconnect.CANCEL):
            stream.cancel()

    def stop_generating(self, stream: Fed) -> None:
        """Stop for good (``stream.stopping`` is set): the running producer stops within one token."""
        if stream.producer_running:
            stream.cancel()

    def shut_down(self, stream: Fed) -> None:
        """The server is shutting down (its producers are cancelled with the loop)."""

    def release(self, stream: Fed) -> None:
        """``stream`` is forgotten here: let go of what only this source holds."""

    def at_creation(self, stream: Fed) -> Process | None:
        """A producer to run from the stream's creation on, before anyone reads (None: the first reader starts one)."""
        return None


class Canned(Source):
    """The canned ``model`` on a log read with plain calls: a ``Sleep`` per model step, then append, then pass on."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.length = len(model)

    @property
    def steps(self) -> Mapping[int, int]:
        return self.model.steps

    def produce(self, stream: Fed, start: int) -> Process:
        """Generate ``start..length-1``, checking for cancellation before each token: as a ``Run`` of the driver's
        where it takes one, else a ``Sleep`` and a ``Put`` per token.

        A log error (the stream was evicted) stops it and ends the attached
        connections without ``done``; the error is re-raised to the driver.
        """
        steps, index, end = CannedSteps(self.model, stream), start, stream.total
        lane = True                                 # the driver may take the steps (``Run``) until it once does not
        try:
            while index < end:
                if stream.cancelled:
                    self._cancelled(stream, index)
                    return
                if lane:
                    ran = yield Run(stream, steps, index, end)
                    if ran != index:
                        index = ran
                        continue
                    lane = False
                yield Sleep(steps.cost(index))
                yield Put(stream, steps.make(index))
                index += 1
            if stream.ending is not None:           # ended under the producer (a reader found the log lost it)
                return
            if stream.stopping:                     # asked to stop as the last token was made
                self._stopped(stream, stream.total)
                return
            stream.log.set_state(stream.stream_id, StreamState.DONE)
            stream.ended(stream.total)
        except LogError as exc:
            stream.abandon(exc)
            raise
        except Exception as exc:      # a bug under the producer (the model's, a hand-over's): raised to the driver
            _failed(stream, exc)      # and its readers told now, not left waiting on heartbeats for ever
            raise

    def stop_generating(self, stream: Fed) -> None:
        """As ``Source``'s; the log says ``stopped`` now (a finished stream stays ``done``)."""
        if stream.producer_running:
            stream.log.set_state(stream.stream_id, StreamState.STOPPED)   # a reconnect meanwhile gets the ending
            super().stop_generating(stream)
        elif stream.log.state(stream.stream_id) is not StreamState.DONE:
            self._stopped(stream, stream.log.length(stream.stream_id))

    def _stopped(self, stream: Fed, total: int) -> None:
        stream.log.set_state(stream.stream_id, StreamState.STOPPED)
        stream.stopped_at(total)

    def _cancelled(self, stream: Fed, index: int) -> None:
        if stream.stopping:
            self._stopped(stream, index)
            return
        stream.idle()
        stream.log.set_state(stream.stream_id, StreamState.CANCELLED)


def _failed(stream: Fed, exc: Exception) -> None:
    """End ``stream`` as failed after what its log holds: every reader drains, then gets ``failed`` naming the
    error's type (its text, which may hold anything, goes only to the driver's error handler).  A stream that
    ended already (a reader found the log lost it) keeps its ending."""
    if stream.ending is not None:
        return
    ending = failed(raised(exc))
    try:
        reached = stream.log.length(stream.stream_id)
        stream.log.set_state(stream.stream_id, ending_state(ending))     # as a user model's failure is logged
    except LogError:
        reached = stream.offered + 1
    stream.ended(reached, ending)


class CannedSteps:
    """A canned model's steps on ``stream`` (``Steps``): its cost per index, and making one: generate, append to
    the log, ``Stream.passing``; the same whether a driver's ``Run`` takes them or the producer does."""

    __slots__ = ("_append", "_generate", "_passing", "_sid", "_stream", "cost")

    def __init__(self, model: Model, stream: Fed) -> None:
        self.cost, self._generate, self._stream = model.cost_ns, model.generate, stream
        self._append, self._sid, self._passing = stream.log.append, stream.stream_id, stream.passing

    @property
    def cancelled(self) -> bool:
        return self._stream.cancelled

    def make(self, index: int) -> TokenItem:
        token = self._generate(index)
        self._append(self._sid, index, token)
        item = new_item((index, token))
        self._passing(item)
        return item
