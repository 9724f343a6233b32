"""The token log a live server runs on, and the registry's stream factories for it: in memory, or shared (Redis).

How this works: ``make_registry`` opens the log ``--log`` /
``TOKENWIRE_LOG_URL`` names (``redislog.streams.open_log``) and gives the
``Registry`` the factories that build streams for it.  On a log in memory
they are ``live_stream``'s; on a shared log, a canned stream's source is a
``SharedCanned`` and its writer's reads are awaited (``AwaitedReads``), and
its spec is kept in the log's meta, so any instance can rebuild it
(``attach_stream``, ``attach_stream_async``).  ``tokenwire serve`` and
``TokenStreams`` both make their registry here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.clock import RealClock
from ..core.pipeline import RunSpec
from ..core.stream import Stream
from ..core.tokenlog import TokenLog, UnknownStream
from ..redislog.streams import AwaitedReads, SharedCanned, aio_of, is_shared, open_log
from . import live_stream, registry
from .live_stream import stream_spec

__all__ = ["attach_stream", "attach_stream_async", "make_registry", "new_stream", "new_stream_async"]


def _shared_canned(spec: RunSpec, stream_id: str, log: TokenLog, **options: Any) -> Stream:
    """The canned answer ``spec`` shapes as a stream on the shared ``log``: its producer and its reads awaited."""
    aio = aio_of(log)
    return spec.stream(stream_id, log, SharedCanned(spec.model(), aio), reads=AwaitedReads(aio), **options)


def new_stream(stream_id: str, spec: RunSpec, log: TokenLog, *, keep_trace: bool = False,
               meta: Mapping[str, Any] | None = None) -> Stream:
    """Create a stream of ``spec`` in ``log`` (its source a ``SharedCanned`` if the log is shared); returns it.

    ``meta``: more for the log to keep with the stream's spec (its principal).
    """
    if not is_shared(log):
        return live_stream.new_stream(stream_id, spec, log, keep_trace=keep_trace, meta=meta)
    return _shared_canned(spec, stream_id, log, meta={**live_stream.spec_to_meta(spec), **(meta or {})},
                          keep_trace=keep_trace)


def attach_stream(stream_id: str, log: TokenLog) -> Stream:
    """Rebuild a stream another instance created in the shared ``log``; returns it.

    Raises ``UnknownStream`` if the log does not hold it (or it was not made
    by a live server), ``LogUnavailable``.
    """
    if not is_shared(log):
        return live_stream.attach_stream(stream_id, log)
    return _shared_canned(stream_spec(stream_id, log.meta(stream_id)), stream_id, log, attach=True, keep_trace=False)


async def new_stream_async(stream_id: str, spec: RunSpec, log: TokenLog, *, keep_trace: bool = False,
                           meta: Mapping[str, Any] | None = None) -> Stream:
    """``new_stream`` for code on an event loop: a shared log is written with an awaited call."""
    if not is_shared(log):
        return live_stream.new_stream(stream_id, spec, log, keep_trace=keep_trace, meta=meta)
    kept = {**live_stream.spec_to_meta(spec), **(meta or {}), "policy": spec.policy.value, "capacity": spec.capacity}
    await aio_of(log).create(stream_id, kept, spec.length)
    return _shared_canned(spec, stream_id, log, attach="checked", keep_trace=keep_trace)


async def attach_stream_async(stream_id: str, log: TokenLog) -> Stream:
    """``attach_stream`` for code on an event loop; raises ``UnknownStream``, ``LogUnavailable``."""
    if not is_shared(log):
        return live_stream.attach_stream(stream_id, log)
    meta, total, _, _ = await aio_of(log).info(stream_id)
    spec = stream_spec(stream_id, meta)
    if total != spec.length:
        raise UnknownStream(stream_id)          # not a stream a live server made
    return _shared_canned(spec, stream_id, log, attach="checked", keep_trace=False)


def make_registry(url: str | None, attach_stream_async: registry.AttachStreamAsync | None = None,
                  **kwargs: Any) -> registry.Registry:
    """Return a live-server ``Registry`` on the log ``url`` names (see ``open_log``).

    ``kwargs`` go to ``Registry``.  Raises ``ValueError`` for a bad URL or
    setting; a Redis that is down is not an error here (requests get 503).
    """
    clock = RealClock()
    log = open_log(url, clock.now)
    if not is_shared(log):
        return registry.Registry(clock=clock, **kwargs)
    return registry.Registry(log, clock=clock, new_stream=new_stream, attach_stream=attach_stream,
                             new_stream_async=new_stream_async,
                             attach_stream_async=attach_stream_async or globals()["attach_stream_async"], **kwargs)
