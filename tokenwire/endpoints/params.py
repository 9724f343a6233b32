"""The live endpoints' requests, parsed: the query's parameters, ``cut_after`` and the resume cursor (pure).

How this works: ``split_query`` separates the live-only parameters
(``LIVE_PARAMS``) from the report's, which ``tokenwire.report.params`` validates;
``spec_from_query`` turns a create request into the stream's ``RunSpec``
(``spec_from_params``) and its ``cut_after``; ``resume_cursor`` reads the
``Last-Event-ID`` header or ``?last_event_id=``.  Every refusal is a
``RequestError`` with the status to answer and a message that quotes the
bad value (``echo``).

Resume cursors (``Last-Event-ID``) are validated strictly: absent or empty
means "from the start"; otherwise ASCII decimal digits without leading
zeros, at most ``MAX_ID_DIGITS`` of them, naming an index the stream has
generated.  The header's bytes are read as UTF-8 and the whitespace HTTP
allows around a field value is not part of it (``header_text``).  Anything
else is a 400 that quotes the value (shortened past ``MAX_ECHO_CHARS``).  An
id is an index within the stream the URL names: one copied from another
stream is read as an index of this one and never reaches the other stream.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from urllib.parse import parse_qsl, urlencode

from ..core.channel import Policy
from ..core.model import PARTS_ANSWERS
from ..core.pipeline import RunSpec
from ..report.params import NAMES, ParamError, ReportParams, cut_after_message, parse_query

__all__ = [
    "CREATE_PARAMS",
    "LIVE_PARAMS",
    "MAX_ECHO_CHARS",
    "MAX_ID_DIGITS",
    "PastTheEnd",
    "MAX_QUERY_FIELDS",
    "REPORT_ONLY_PARAMS",
    "RequestError",
    "cut_range_message",
    "echo",
    "header_text",
    "parse_count",
    "resume_cursor",
    "spec_from_params",
    "spec_from_query",
    "split_query",
    "unknown_stream_message",
    "utf8",
]

# A resume id has at most this many digits: 9 digits exceed any answer and
# keep a hostile "99999...9" from ever becoming a big int.
MAX_ID_DIGITS = 9
# Bad values are quoted in error messages up to this many characters, so a
# 10,000-digit id or a very long parameter never comes back whole.
MAX_ECHO_CHARS = 40
# More query fields than any request here needs (nine report parameters and two live ones).
MAX_QUERY_FIELDS = 64

# Create queries whose parsed spec is remembered (a load test repeats one).
SPEC_CACHE = 256
# Query parameters the live endpoints take that the report does not (``parts``: what the canned answer is made
# of, ``core.model.PARTS_ANSWERS``).
LIVE_PARAMS = ("cut_after", "last_event_id", "parts")
# The report's parameters a live stream has no use for: its reader is the client, on the real clock, and
# what it reads is an event stream, not a report in a format.  A create refuses them, as any unknown one.
REPORT_ONLY_PARAMS = ("format", "clock", "reader_ms")
# What a create (POST /streams, GET /stream) of the canned answer takes: the producer's side, and the cut.
CREATE_PARAMS = tuple(name for name in NAMES if name not in REPORT_ONLY_PARAMS)

_DECIMAL = re.compile(r"0|[1-9][0-9]*")


class RequestError(Exception):
    """A request the live endpoints refuse: ``status`` and a message that quotes the bad value."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


class PastTheEnd(RequestError):
    """A 400 for a resume past what the log gives a stream that still generates.  On a shared log it means the
    log went back past what the reader was sent (a failover): the caller makes it the lost stream's 410
    (``rules.lost_if_behind``), never generating on from the log's end, unless the log grew meanwhile."""

    def __init__(self, message: str) -> None:
        super().__init__(400, message)


def echo(value: str) -> str:
    """Return ``repr(value)``, shortened past ``MAX_ECHO_CHARS`` (with the full length said)."""
    if len(value) <= MAX_ECHO_CHARS:
        return repr(value)
    return f"{value[:MAX_ECHO_CHARS]!r}... ({len(value)} characters)"


def split_query(query: str) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Return the report part of ``query`` (its decoded pairs, in order) and the live-only parameters; raises
    ``RequestError``.  Every event-stream request splits its query: the pairs are not encoded again unless a
    caller needs them as a query string (``spec_from_query``, remembered per query)."""
    rest: list[tuple[str, str]] = []
    live: dict[str, str] = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, max_num_fields=MAX_QUERY_FIELDS)
    except ValueError:
        raise RequestError(400, f"query string has more than {MAX_QUERY_FIELDS} parameters") from None
    for name, value in pairs:
        if name not in LIVE_PARAMS:
            rest.append((name, value))
        elif name in live:
            raise RequestError(400, f"parameter {name!r} given more than once ({echo(live[name])} and "
                                    f"{echo(value)}); give it once")
        else:
            live[name] = value
    return rest, live


def parse_count(name: str, value: str) -> int:
    """Return ``value`` as a non-negative decimal int; raises ``RequestError`` naming ``name``."""
    if len(value) > MAX_ID_DIGITS or not value.isascii() or not _DECIMAL.fullmatch(value):
        raise RequestError(400, f"{name} must be a decimal integer without sign or leading zeros "
                                f"(at most {MAX_ID_DIGITS} digits), got {echo(value)}")
    return int(value)


def utf8(raw: str) -> str:
    """Return text an adapter decoded as Latin-1 (request target, headers) decoded as UTF-8 instead.

    Bytes that are not UTF-8 become U+FFFD, so a message can quote them.
    """
    return raw.encode("latin-1", "replace").decode("utf-8", "replace")


def header_text(raw: str) -> str:
    """Return a header value as its sender wrote it: UTF-8, without the whitespace HTTP allows around it."""
    return utf8(raw).strip(" \t")


def unknown_stream_message(stream_id: str) -> str:
    """The 404 a stream id the token log does not hold gets (also after a restart: the log was in memory)."""
    return (f"unknown stream {stream_id!r}: never created here, evicted from the token log (too old or too many "
            f"streams), or lost when the server restarted; start a new one with POST /streams")


def cut_range_message(tokens: int, value: str) -> str:
    """The 400 for a live ``cut_after`` outside 0..tokens-1: the report's own message, one range everywhere."""
    return cut_after_message(tokens, value)


@functools.lru_cache(maxsize=SPEC_CACHE)
def spec_from_query(query: str) -> tuple[RunSpec, int | None]:
    """Return the stream spec and ``cut_after`` a create request asks for; raises ``RequestError``.

    Pure, so remembered per query string: a thousand clients opening the
    same stream URL parse it once.
    """
    pairs, live = split_query(query)
    if "last_event_id" in live:
        raise RequestError(400, "last_event_id applies to /streams/<id>/events, not to a new stream")
    _check_create_names(pairs)
    try:
        spec = spec_from_params(parse_query(urlencode(pairs)))
    except (ParamError, ValueError) as exc:
        raise RequestError(400, str(exc)) from None
    if "parts" in live:
        if live["parts"] not in PARTS_ANSWERS:
            raise RequestError(400, f"parts must be one of {', '.join(PARTS_ANSWERS)}; got {echo(live['parts'])}")
        spec = dataclasses.replace(spec, parts=live["parts"])
    cut = parse_count("cut_after", live["cut_after"]) if "cut_after" in live else None
    if cut is not None and not 0 <= cut < spec.length:
        raise RequestError(400, cut_range_message(spec.length, live["cut_after"]))
    return spec, cut


def _check_create_names(pairs: list[tuple[str, str]]) -> None:
    """Refuse (400) a create parameter that is unknown or the report's alone; the values are checked after."""
    allowed = ", ".join(CREATE_PARAMS)
    for name, value in pairs:
        if name in REPORT_ONLY_PARAMS:
            raise RequestError(400, f"parameter {name!r} (given {echo(value)}) is the report's, not a live "
                                    f"stream's: its reader is the client, on the real clock; allowed: {allowed}")
        if name not in CREATE_PARAMS:
            raise RequestError(400, f"unknown parameter {echo(name)} (given {echo(value)}); allowed: {allowed}")


# The report's scenarios, as the policy of a live stream.  ``baseline`` and
# ``disconnect`` are the report's fast-reader and hang-up-and-resume
# sections, both on a ``block`` channel; live, the reader's speed is the
# real client's and the hang-up is ``cut_after``.
_POLICY_OF_SCENARIO = {"baseline": Policy.BLOCK, "block": Policy.BLOCK, "drop-newest": Policy.DROP_NEWEST,
                       "drop-oldest": Policy.DROP_OLDEST, "disconnect": Policy.BLOCK}


def spec_from_params(params: ReportParams) -> RunSpec:
    """Return the ``RunSpec`` of a live stream for the report's parameters.

    Only the producer side is taken (answer length, policy from the
    scenario, buffer, producer pace, seed): the reader is the real client,
    so ``reader_ms``, ``clock`` and ``format`` do not apply, and the report's
    default ``cut_after`` is not a cut (a live cut is asked for explicitly).
    """
    return RunSpec(tokens=params.tokens, policy=_POLICY_OF_SCENARIO[params.scenario], capacity=params.buffer,
                   producer_ms=params.producer_ms, seed=params.seed)


def resume_cursor(header: str | None, query_value: str | None, total: int, generated: int) -> int:
    """Return the exclusive cursor a connection asks for (-1: from the start).

    A non-empty header wins over the query parameter (an empty header says
    nothing, so the query's id still counts).  Raises ``RequestError`` 400
    for a malformed id or one the stream has not generated.
    """
    use_header = header is not None and (header != "" or query_value is None)
    source, value = ("Last-Event-ID", header) if use_header else ("last_event_id", query_value)
    if value is None or value == "":
        return -1
    cursor = parse_count(source, value)
    if cursor >= total:
        raise RequestError(400, f"{source} {value!r} is past the end: this stream has ids 0..{total - 1}")
    if cursor >= generated:
        so_far = f"ids 0..{generated - 1} so far" if generated else "no ids yet"
        raise RequestError(400, f"{source} {value!r} was never sent: this stream has generated {so_far}")
    return cursor
