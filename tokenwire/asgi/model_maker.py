"""Your model as the endpoints' ``StreamMaker``: a create query read as the model's parameters, a stream made per call.

How this works: ``parse`` keeps the live parameters tokenwire reads
(``cut_after``; ``last_event_id`` is refused on a new stream) and hands
every other query parameter to the model as given, once each.  ``make``
calls the factory with a ``StreamRequest`` (the new id, those parameters,
the body, the client, the request's headers and the principal the app's
``authorize`` hook named) and makes its iterator a stream's source: a
``ModelTokens``, or, on a shared log, a ``SharedModel`` in a stream created
there first, so that this
process owns it (it takes the lease right after creating it: the owner
holds it from the start).  A ``ValueError`` from the factory is the
client's 400; any other exception a 500 naming its type (its message and
traceback go to the log only: they may hold secrets).

``takeover``: what a follower does when the stream's owner is gone
(``shared_model``): ``"end"`` (the default) ends it with the early-stop
``done``; ``"continue"`` keeps the request in the stream's meta (its headers
but those named in ``keep_out_of_log``: credentials stay out of Redis), and a
follower calls the factory again with it and the logged prefix, if its
model has the name the meta records (``model_name``): a process serving
another model ends the stream ``owner lost`` rather than continue one
model's answer with another's.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import secrets
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.channel import Policy
from ..core.stream import OnDisconnect, Stream
from ..core.tokenlog import TokenLog
from ..endpoints.access import SECRET_HEADERS, header_map, owner_meta, told
from ..endpoints.decisions import Asked, ChatRequest, LiveRequest, OpenAIRequest, promised_leave
from ..endpoints.logs import attach_stream_async
from ..endpoints.params import RequestError, cut_range_message, parse_count, split_query
from ..endpoints.registry import STREAM_ID_BYTES, LiveStream, Registry
from ..redislog.streams import aio_of
from .model_start import open_iterator
from .model_stream import MAX_MODEL_TOKENS, ModelFactory, ModelTokens, StreamRequest
from .shared_model import (
    META,
    NAME_KEY,
    REQUEST_KEY,
    Continuation,
    attach_model_stream,
    is_model_meta,
    request_from_meta,
    request_to_meta,
    shared_model_stream,
)

__all__ = ["KEEP_OUT_OF_LOG", "TAKEOVERS", "ModelMaker", "attach", "check_keep_out", "check_takeover",
           "model_name"]

# What a follower does when a model stream's owner is gone: end it ("owner lost"), or continue the model.
TAKEOVERS = ("end", "continue")
# The meta key of what a model stream does when its last reader leaves: the route's promise, which a process
# that follows the stream keeps too (a chat completion read elsewhere is still one).
LEAVE_KEY = "on_disconnect"
# The request headers a continuable stream never writes to the log: credentials.  The others are kept with the
# stream (in Redis) for as long as it is, so a continuation's factory gets them again.
KEEP_OUT_OF_LOG = SECRET_HEADERS

logger = logging.getLogger("tokenwire.asgi")


def check_takeover(takeover: str) -> str:
    """Return ``takeover`` if it is one of ``TAKEOVERS``; raises ``ValueError`` naming it otherwise."""
    if takeover not in TAKEOVERS:
        raise ValueError(f"takeover must be 'end' or 'continue', got {takeover!r}")
    return takeover


def model_name(factory: ModelFactory, name: str | None = None) -> str:
    """``name`` if given (a non-empty str), else the factory's qualified name, ``module.qualname``.

    The default is the same in every process running the same code, and differs between two functions
    (a ``functools.partial`` is named by the function it wraps).  Raises ``TypeError``/``ValueError`` for a
    bad ``name``.
    """
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise (ValueError if isinstance(name, str) else TypeError)(
                f"name must be a non-empty str naming the model, got {name!r}")
        return name
    while isinstance(factory, functools.partial):
        factory = factory.func
    named: Any = factory if hasattr(factory, "__qualname__") else type(factory)   # a callable object: its class
    return f"{named.__module__}.{named.__qualname__}"


def check_keep_out(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` (header names) lower-cased; raises ``TypeError`` for a lone ``str`` or a name that is not one."""
    if isinstance(names, str):
        raise TypeError(f"keep_out_of_log must be a tuple of header names, got the str {names!r}; "
                        f"write ({names!r},)")
    kept = tuple(names)
    for name in kept:
        if not isinstance(name, str):
            raise TypeError(f"keep_out_of_log must hold header names (str), got {name!r}")
    return tuple(name.lower() for name in kept)


def _body_cut(body: Mapping[str, Any]) -> int | None:
    """A JSON body's ``cut_after`` (None: not given); raises ``RequestError`` 400 for a bad one."""
    value = body.get("cut_after")
    if value is None:
        return None
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str):
        raise RequestError(400, f"cut_after must be a number or a string, got {value!r}")
    return _cut(text)


def _cut(text: str) -> int:
    """``cut_after`` as given (query or body): a count of tokens below the most a model stream keeps."""
    cut = parse_count("cut_after", text)
    if not 0 <= cut < MAX_MODEL_TOKENS:
        raise RequestError(400, cut_range_message(MAX_MODEL_TOKENS, text))
    return cut


class ModelMaker:
    """Make streams from ``factory`` with the given channel ``policy``, ``buffer`` and ``on_disconnect``.

    ``on_disconnect`` is what a reader leaving does on tokenwire's own routes;
    the others keep their dialect's promise (``promised_leave``: ``/chat``
    and a response run to their end, a chat completion stops its model).

    ``name`` (None: ``model_name``'s default) is recorded in each stream's
    meta: only a process whose model has the same name continues a stream.
    ``keep_out_of_log``: the headers a continuable stream's logged request leaves out.
    """

    def __init__(self, factory: ModelFactory, registry: Registry, *, policy: Policy, buffer: int,
                 on_disconnect: OnDisconnect, takeover: str = "end", name: str | None = None,
                 keep_out_of_log: Iterable[str] = KEEP_OUT_OF_LOG) -> None:
        self.factory, self.registry, self.takeover = factory, registry, check_takeover(takeover)
        self.name = model_name(factory, name)
        self.keep_out_of_log = check_keep_out(keep_out_of_log)
        self.policy, self.buffer, self.on_disconnect = policy, buffer, on_disconnect
        self.streams: weakref.WeakSet[Stream] = weakref.WeakSet()

    def parse(self, query: str) -> Asked:
        rest, live = split_query(query)
        if "last_event_id" in live:
            raise RequestError(400, "last_event_id applies to /streams/<id>/events, not to a new stream")
        cut = _cut(live["cut_after"]) if "cut_after" in live else None
        params: dict[str, str] = {}
        for name, value in rest:
            if name in params:
                raise RequestError(400, f"parameter {name!r} given more than once; give it once")
            params[name] = value
        return Asked(None, params, cut)

    def parse_chat(self, chat: ChatRequest) -> Asked:
        return Asked(None, {}, _body_cut(chat.body), chat)

    def parse_openai(self, request: OpenAIRequest) -> Asked:
        return Asked(None, {}, _body_cut(request.body), openai=request)

    async def model_ids(self) -> list[str]:
        # A factory that knows its models says so (``Upstream``: the upstream's); any other is its name.
        listed = getattr(self.factory, "model_ids", None)
        if listed is None:
            return [self.name]
        try:
            return list(await listed())
        except Exception as exc:
            logger.error("tokenwire: listing the model's models failed: %s: %s", type(exc).__name__, exc)
            raise RequestError(502, f"the model could not list its models ({type(exc).__name__})") from None

    async def make(self, asked: Asked, request: LiveRequest, body: bytes) -> LiveStream:
        stream_id = secrets.token_urlsafe(STREAM_ID_BYTES)
        made = StreamRequest(stream_id, asked.params, body, request.client, chat=asked.chat,
                             headers=header_map(request.headers, self.keep_out_of_log), principal=request.principal,
                             openai=asked.openai)
        try:
            iterator = await open_iterator(self.factory, made)
        except ValueError as exc:
            raise RequestError(400, str(exc)) from None
        except Exception as exc:
            logger.error("tokenwire: the model factory raised %s\n%s", type(exc).__name__, told(exc, made.headers))
            raise RequestError(500, f"the model factory raised {type(exc).__name__}") from None
        stream: Stream
        policy, capacity = self.policy, self.buffer
        on_disconnect = promised_leave(asked) or self.on_disconnect     # the route's promise, else the app's
        owner = owner_meta(request.principal)
        if self.registry.aio is not None:        # a shared log: created with an awaited call, then owned here
            logged = self.logged(made)
            meta: dict[str, Any] = {**META, NAME_KEY: self.name, **owner, "policy": policy.value,
                                    "capacity": capacity, LEAVE_KEY: on_disconnect.value}
            if self.takeover == "continue":
                meta[REQUEST_KEY] = request_to_meta(logged)
            await self.registry.aio.create(stream_id, meta, MAX_MODEL_TOKENS)
            await self.registry.aio.claim(stream_id)      # owned from the start: no lease means no owner
            stream = shared_model_stream(stream_id, iterator, self.registry.log, policy=policy, capacity=capacity,
                                         on_disconnect=on_disconnect, continuation=self.continuation(logged),
                                         headers=made.headers)
        else:
            stream = Stream(stream_id, ModelTokens(iterator, made.headers), self.registry.log,
                            meta={**META, NAME_KEY: self.name, **owner}, policy=policy, capacity=capacity,
                            on_disconnect=on_disconnect, keep_trace=False)
        self.streams.add(stream)
        return self.registry.adopt(stream, asked.cut)

    def logged(self, request: StreamRequest) -> StreamRequest:
        """``request`` as the log keeps it (``request_to_meta``): without the headers kept out of the log."""
        kept = {name: value for name, value in request.headers.items() if name not in self.keep_out_of_log}
        return dataclasses.replace(request, headers=kept)

    def continuation(self, request: StreamRequest | None) -> Continuation | None:
        """What a follower needs to continue a stream made for ``request`` (None: it ends instead)."""
        return (self.factory, request) if self.takeover == "continue" and request is not None else None



async def attach(registry: Registry, stream_id: str, log: TokenLog, *, policy: Policy, buffer: int,
                 on_disconnect: OnDisconnect, models: ModelMaker | None = None) -> Stream:
    """A stream another process made in the shared log: a model's is followed, a canned one rebuilt.

    ``on_disconnect`` is the app's; a model stream whose meta records its
    route's (``LEAVE_KEY``) keeps that one, wherever it is read.
    With ``models`` (the app's model maker), a model stream made to be
    continued is continued here if its owner is gone, and only if it was
    made by a model of the same name: another model's stream ends ``owner
    lost`` instead of being continued with another answer.
    """
    meta = await aio_of(log).meta(stream_id)
    if not is_model_meta(meta):
        return await attach_stream_async(stream_id, log)
    same = models is not None and meta.get(NAME_KEY) == models.name
    if meta.get(LEAVE_KEY) in tuple(OnDisconnect):
        on_disconnect = OnDisconnect(meta[LEAVE_KEY])         # its route's promise, as its owner keeps it
    continuation = models.continuation(request_from_meta(stream_id, meta)) if models is not None and same else None
    stream = await attach_model_stream(stream_id, log, policy=policy, capacity=buffer, on_disconnect=on_disconnect,
                                       continuation=continuation)
    if models is not None:
        models.streams.add(stream)             # a shutdown stops the model it may continue here
    return stream
