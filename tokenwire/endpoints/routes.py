"""The live routes as data: one table that both servers, the HTTP layer's early checks and the README read.

How this works: a ``Route`` is a path pattern (``/streams/<id>/events``: a
``<name>`` segment is an id, ``[A-Za-z0-9_-]{1,64}``), the methods it takes,
its ``kind`` (which ``Endpoints`` handler answers it), the ``action`` it
asks for (``create``, ``read``, ``stop``, ``scrape``: what an authorization rule checks),
its body (the setting that names its limit and the limit; a route without
one takes no body and ignores what is sent), its query (the parameters it
takes, none, or its handler's to read; which may come twice; or, for
``POST /chat``, whose parameters are its body's, ignored: ``check_query``),
and the format of its errors
(``tokenwire``: ``{"error": message}``; ``openai``: ``{"error": {"message",
"type", "code"}}``).  ``RouteTable.find`` answers a path (as sent) and a
method with the route and its parameters, or the refusal (404, 405 with
``Allow``, 501, and 400 for a path with two spellings: ``routed_path``
percent-decodes a path once, the rule of both servers, and refuses one that
encodes ``/`` or an unreserved character);
``with_limits`` sets body limits by setting name (``max_body_bytes``), so
every limit is settable where the server is made.  Adding a route to the
table is all it takes for ``tokenwire serve`` and ``TokenStreams`` to route
it, refuse it and hold its body to its limit alike, provided its ``kind``
is one ``Endpoints`` answers.
"""

from __future__ import annotations

import re
import string
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from .config import MAX_BODY_BYTES, MAX_CHAT_BODY_BYTES
from .params import RequestError, echo
from .rules import (
    KNOWN_METHODS,
    check_declared_body,
    check_query,
    check_transfer_encoding,
    chunked_error,
    method_error,
    no_route_error,
    not_implemented_error,
)

__all__ = ["ERROR_FORMATS", "ID_SEGMENT", "LIVE_ROUTES", "QUERY_BODY", "Action", "ErrorFormat", "Found", "Route",
           "RouteTable", "routed_path"]

Action = Literal["create", "read", "stop", "scrape"]
ErrorFormat = Literal["tokenwire", "openai"]
ERROR_FORMATS: tuple[ErrorFormat, ...] = ("tokenwire", "openai")
_ACTIONS: tuple[Action, ...] = ("create", "read", "stop", "scrape")
# What a ``<name>`` segment matches: a stream id (``secrets.token_urlsafe(16)`` is 22 of these) and room to spare.
ID_SEGMENT = "[A-Za-z0-9_-]{1,64}"
_PARAM = re.compile(r"<([a-z_]+)>")
# The setting of a body that carries nothing a route reads as its parameters (``POST /streams`` takes them from
# its query; a form post's body is read up to it and handed to a model): a chunked one is told to use the query.
QUERY_BODY = "max_body_bytes"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
# What a path may spell percent-encoded or as is: RFC 3986's unreserved characters, and '/'.  A path that
# encodes one has two spellings, and a proxy rule written for one would let the other through.
_ONE_SPELLING = frozenset(string.ascii_letters + string.digits + "-._~/")


def routed_path(path: str) -> str:
    """The path a route sees: ``path`` as sent, percent-decoded once (as uvicorn decodes ``scope["path"]``).

    Raises ``RequestError`` 400 for a path that percent-encodes ``/`` or an
    unreserved character (``/strea%6D``, ``/streams/<id>%2Fevents``).
    """
    if "%" not in path:
        return path
    for escape in _ESCAPE.finditer(path):
        char = chr(int(escape.group(1), 16))
        if char in _ONE_SPELLING:
            raise RequestError(400, f"the path {echo(path)} percent-encodes {char!r} as {escape.group(0)!r}; "
                                    f"send it as itself")
    return urllib.parse.unquote(path)


def _compile(pattern: str) -> re.Pattern[str]:
    parts = _PARAM.split(pattern)          # literal, name, literal, name, ...
    regex = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>{ID_SEGMENT})" for i, part in enumerate(parts))
    return re.compile(regex)


@dataclass(frozen=True, slots=True)
class Route:
    """One live route.

    pattern: the path, ``<name>`` for an id segment; methods: what it takes;
    kind: the ``Endpoints`` handler that answers it; action: what it asks
    for (``create``, ``read``, ``stop``, ``scrape``); body_setting: the setting that
    limits its body (None: it takes no body); body_limit: that limit in
    bytes; errors: the format of its refusals; summary: its README line;
    params: the only query parameters it takes (``()``: no query string;
    None: its handler reads the query); repeatable: those that may come more
    than once; ignores_query: its query is not read at all.
    """

    pattern: str
    methods: tuple[str, ...]
    kind: str
    action: Action
    body_setting: str | None = None
    body_limit: int = 0
    errors: ErrorFormat = "tokenwire"
    summary: str = ""
    params: tuple[str, ...] | None = None
    repeatable: tuple[str, ...] = ()
    ignores_query: bool = False
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.pattern.startswith("/"):
            raise ValueError(f"a route's pattern must start with '/', got {self.pattern!r}")
        if not self.methods or not set(self.methods) <= KNOWN_METHODS:
            raise ValueError(f"a route's methods must be some of {sorted(KNOWN_METHODS)}, got {self.methods!r}")
        if self.action not in _ACTIONS:
            raise ValueError(f"a route's action must be one of {_ACTIONS}, got {self.action!r}")
        if self.errors not in ERROR_FORMATS:
            raise ValueError(f"a route's errors must be one of {ERROR_FORMATS}, got {self.errors!r}")
        limit = self.body_limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"{self.body_setting or 'body_limit'} must be a non-negative int, got {limit!r}")
        object.__setattr__(self, "regex", _compile(self.pattern))

    @property
    def takes_body(self) -> bool:
        """Whether the route reads a request body (held to ``body_limit``)."""
        return self.body_setting is not None

    @property
    def allow(self) -> str:
        """The ``Allow`` value of this route's path."""
        return ", ".join(self.methods)

    def check_body(self, transfer_encoding: list[str], content_length: list[str]) -> None:
        """Refuse, before anything is read, a body framed but by its length (``check_transfer_encoding``: a chunked
        one is 411) or one ``Content-Length`` puts past the limit (413).

        ``transfer_encoding``, ``content_length``: the request's values of
        those headers.  Raises ``RequestError`` (a malformed length is 400).
        """
        check_transfer_encoding(transfer_encoding, content_length, chunked_error(query=self.body_setting == QUERY_BODY))
        check_declared_body(content_length, self.body_limit)

    def check_query(self, query: str) -> None:
        """Refuse (400) a query string or a parameter this route does not take, or one given twice
        (``rules.check_query``); nothing for a route that ignores its query."""
        if not self.ignores_query:
            check_query(query, self.params, self.repeatable, self.described())

    def described(self) -> str:
        """``POST /streams``: the methods and the pattern, as the README and a 404 name it."""
        return f"{'/'.join(self.methods)} {self.pattern}"


@dataclass(frozen=True, slots=True)
class Found:
    """A request's route and the path's parameters (``{"id": ...}``)."""

    route: Route
    params: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class RouteTable:
    """Every live route, in the order a path is tried."""

    routes: tuple[Route, ...]

    def __post_init__(self) -> None:
        patterns = [route.pattern for route in self.routes]
        if len(set(patterns)) != len(patterns):
            raise ValueError(f"each pattern is one route (list its methods together), got {patterns!r}")

    def route_of(self, path: str) -> tuple[Route, dict[str, str]] | None:
        """The route whose pattern ``path`` (decoded: ``routed_path``) matches, and its parameters; None if none."""
        for route in self.routes:
            match = route.regex.fullmatch(path)
            if match is not None:
                return route, match.groupdict()
        return None

    def errors_of(self, path: str) -> ErrorFormat:
        """The error format of the route at ``path`` (as sent): its own; where none matches, OpenAI's under
        OpenAI's first segment (``/v1/embeddings``), else tokenwire's."""
        try:
            found = self.route_of(routed_path(path))
        except RequestError:
            return "tokenwire"
        if found is not None:
            return found[0].errors
        return "openai" if self._openai_prefix(path) else "tokenwire"

    def _openai_prefix(self, path: str) -> bool:
        """Whether ``path``'s first segment is one only OpenAI's routes have (``/v1``): all its paths are ours."""
        first = path.split("/")[1]
        formats = {route.errors for route in self.routes if route.pattern.split("/")[1] == first}
        return formats == {"openai"}

    def claims(self, path: str) -> bool:
        """Whether these routes answer ``path`` as sent: one of theirs, or one refused for its spelling."""
        try:
            return self.route_of(routed_path(path)) is not None or self._openai_prefix(path)
        except RequestError:
            return True

    def find(self, path: str, method: str, *, alone: bool) -> Found | None:
        """The route ``method`` asks for at ``path`` (as sent); None for a path none serves (unless ``alone``).

        Raises ``RequestError``: 400 for a path with two spellings
        (``routed_path``); 405 (with ``Allow``) for a method the path's
        route does not take; when ``alone`` (these routes are all the server
        serves), 501 for a method no route takes and 404 for any other path.
        """
        if alone and method not in KNOWN_METHODS:
            raise not_implemented_error(method)
        path = routed_path(path)
        found = self.route_of(path)
        if found is None:
            if alone or self._openai_prefix(path):
                raise no_route_error(path, self.described())
            return None
        route, params = found
        if method not in route.methods:
            raise method_error(path, method, route.allow)
        return Found(route, params)

    def body_route(self, path: str, method: str) -> Route | None:
        """The route that reads the body of ``method path`` (as sent); None if the request has no body to read."""
        try:
            found = self.route_of(routed_path(path))
        except RequestError:
            return None                     # refused for its spelling, before a body is read
        if found is None or method not in found[0].methods or not found[0].takes_body:
            return None
        return found[0]

    def described(self) -> str:
        """Every route, as a 404 lists them: ``POST /streams, GET /streams/<id>/events and GET /stream``."""
        names = [route.described() for route in self.routes]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"

    def with_limits(self, limits: Mapping[str, int]) -> RouteTable:
        """This table with each body limit named in ``limits`` (``{"max_body_bytes": 2048}``) set.

        Raises ``ValueError`` for a setting no route has, or a bad limit.
        """
        known = {route.body_setting for route in self.routes if route.body_setting is not None}
        unknown = sorted(set(limits) - known)
        if unknown:
            raise ValueError(f"no route's body is limited by {unknown[0]!r}; the settings are {sorted(known)}")
        return RouteTable(tuple(
            replace(route, body_limit=limits[route.body_setting])
            if route.body_setting is not None and route.body_setting in limits else route
            for route in self.routes))

    def add(self, *routes: Route) -> RouteTable:
        """This table with ``routes`` added after its own."""
        return RouteTable((*self.routes, *routes))


LIVE_ROUTES = RouteTable((
    Route("/streams", ("POST",), "create", "create", body_setting=QUERY_BODY, body_limit=MAX_BODY_BYTES,
          summary='`201` `{"stream_id", "events_url"}`; ids are `secrets.token_urlsafe(16)`; the parameters are '
                  "the query's, a body is read up to `max_body_bytes` (1 KiB) and handed to a model"),
    Route("/streams/<id>/events", ("GET",), "events", "read",
          summary="`text/event-stream`: `retry` + `open` (one frame), one `token` frame per token with "
                  "`id: <index>`, then `done` (or `failed`: a model that failed). Resumes strictly after "
                  "`Last-Event-ID` (or `?last_event_id=`)"),
    Route("/stream", ("GET",), "create_and_open", "create",
          summary="creates and streams in one request; the `open` frame names the `stream_id`"),
    Route("/chat", ("POST",), "chat", "create", body_setting="max_chat_body_bytes",
          body_limit=MAX_CHAT_BODY_BYTES,
          summary="the AI SDK's chat: a JSON body `{id?, messages, ...}` up to `max_chat_body_bytes` (1 MiB); "
                  "`200` UI message stream (`x-vercel-ai-ui-message-stream: v1`), the stream id in "
                  "`x-workflow-run-id`", ignores_query=True),
    Route("/chat/<id>/stream", ("GET",), "chat_stream", "read",
          summary="a chat's stream (`204` unless it is generating; then from `start`), or with `?startIndex=N` "
                  "a chat's or a stream's chunks from N on, also after the end"),
    Route("/metrics", ("GET",), "metrics", "scrape",
          summary="this process's figures in Prometheus's text format (see Metrics), only the samples named "
                  "with `?name[]=...` (as prometheus_client's own handler filters); `404` from an app made "
                  "without metrics", params=("name[]",), repeatable=("name[]",)),
    Route("/streams/<id>/stop", ("POST",), "stop", "stop",
          summary='stops generation for good, on whichever instance runs it (the model\'s iterator is closed); '
                  'every reader gets what was logged, then `done` with `"stopped_early": true, "reason": '
                  '"stopped"`, and so does a reconnect. `200` `{"stream_id", "state"}` (`stopped`, or `done` '
                  'for an answer that had finished), again on a second stop; `404` for an unknown id', params=()),
    Route("/chat/<id>/stop", ("POST",), "chat_stop", "stop",
          summary="stops a chat's stream (a chat id: its latest stream; or a stream id) as `/streams/<id>/stop` "
                  "does; its readers end with `finish`. `200` `{\"stream_id\", \"state\"}`, again on a second "
                  "stop; `404` for an unknown id", params=()),
    Route("/v1/chat/completions", ("POST",), "chat_completions", "create", body_setting="max_chat_body_bytes",
          body_limit=MAX_CHAT_BODY_BYTES, errors="openai",
          summary="OpenAI's chat completions: `chat.completion.chunk`s then `data: [DONE]` with `\"stream\": true`, "
                  "else one `chat.completion`", params=()),
    Route("/v1/responses", ("POST",), "responses", "create", body_setting="max_chat_body_bytes",
          body_limit=MAX_CHAT_BODY_BYTES, errors="openai",
          summary="OpenAI's Responses: the events (each with its `sequence_number`) with `stream`, the `response` "
                  "at once with `background`, else the whole `response`", params=()),
    Route("/v1/responses/<id>", ("GET",), "response", "read", errors="openai",
          summary="the `response`; with `?stream=true&starting_after=N` its events after N, live or after the end",
          repeatable=("include", "include[]")),
    Route("/v1/responses/<id>/cancel", ("POST",), "response_cancel", "stop", errors="openai",
          summary="stops the response's generation wherever it runs (as `POST /streams/<id>/stop`); the `response`, "
                  "`cancelled` (or as it ended, if it had)", params=()),
    Route("/v1/models", ("GET",), "models", "read", errors="openai",
          summary="the models this server answers as", params=()),
))
"""The routes of ``tokenwire serve`` and ``TokenStreams``."""
