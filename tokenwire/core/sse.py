"""Server-Sent Events: encode frames, decode a byte stream into events.

The decoder follows the WHATWG HTML "event stream interpretation" rules
(https://html.spec.whatwg.org/multipage/server-sent-events.html) exactly;
the encoder writes frames that this decoder (and any conforming client)
reads back unchanged, except that SSE cannot carry a CR in data.

How this works
--------------
``encode`` builds one frame as a ``str`` and encodes it to UTF-8 once.  The
token-stream case (``event`` and ``id`` given, no CR or LF anywhere) is one
f-string checked in one pass; otherwise the data is split on CRLF, CR and
LF into one ``data:`` line each.

``Decoder.feed`` takes any chunk of bytes:

1. An incremental ``utf-8-sig`` decoder (``errors="replace"``) turns the
   bytes into text: a character split across chunks is joined, invalid
   bytes become U+FFFD, and one BOM is dropped only at the very start of
   the stream, even when its three bytes arrive in separate chunks.
2. Line ends are CRLF, CR or LF only (never U+2028, U+0085, VT or FF, which
   is why ``str.splitlines`` is not used).  A CR that ends a chunk ends a
   line at once; a flag remembers it so that an LF opening the next chunk
   is taken as the second half of that CRLF, not as an empty line.  Within
   a chunk, CRLF and CR are rewritten to LF.
3. The text after the last LF is held back (as a list of pieces, so that
   many tiny chunks stay linear) until its line end arrives.  No line,
   complete or not, may be longer than ``max_line`` characters: the check
   runs on the held-back text and on each chunk's complete lines before any
   of them is interpreted, so the outcome does not depend on chunking.
   No event block (its lines up to the blank line, line ends included) may
   be longer than ``max_event`` characters either: the length of the open
   block is carried from chunk to chunk, one addition per chunk, and the
   chunk's blocks are measured one by one only when that sum passes the
   bound, again before any line is interpreted.  So an upstream that sends
   short ``data`` lines without ever a blank line fails by name once it
   has sent ``max_event`` characters, instead of growing the data buffer.
4. The complete lines are interpreted in up to three parts.  A block that
   an earlier chunk began is finished line by line (``_lines``: the spec's
   field rules, one loop).  The whole blocks after it are, when they all
   have one shape, as a token stream's do (say ``id: N``, ``event: token``,
   ``data: ...``), cut into columns with a few C-level ``str`` calls and
   checked by rebuilding the text from the columns (``_columns``; comment
   lines, which change nothing, are dropped first if they are in the way);
   otherwise one regex finds each common block in C and hands any other
   block to ``_lines`` (``_blocks``).  Lines after the last blank line go to
   ``_lines``.  All three give the same events; the fast two only avoid a
   Python loop per line.
5. Many blocks of which a few differ (a token stream carries a paragraph
   break as a three-line ``data`` block) are cut into runs (``_region``): a
   regex compiled once per shape matches each run of same-shaped blocks in
   C, each run of two or more goes to the column path, and only the odd
   blocks between runs to ``_blocks``, so one odd block costs itself rather
   than the column path of its whole chunk.

The bounds hold for the bytes a reader is fed, so a reader over HTTP asks for
them as sent (``IDENTITY``) and refuses a compressed body by its encoding
(``compressed``, and the words ``not_compressed`` and ``not_read``): the
client and the proxy's relay both read so.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from itertools import repeat

__all__ = [
    "IDENTITY",
    "MAX_EVENT_BYTES",
    "MAX_LINE_BYTES",
    "Decoder",
    "Event",
    "EventTooLong",
    "LineTooLong",
    "SSEError",
    "compressed",
    "encode",
    "encode_comment",
    "not_compressed",
    "not_read",
]

# 1 MiB: far above any real SSE line (a token frame is tens of bytes, a
# whole JSON completion a few KiB), yet a hostile or broken server that
# never sends a line end can only make the decoder hold this much text.
# The decoder counts decoded characters, which for ASCII are bytes.
MAX_LINE_BYTES = 1 << 20
# 2 MiB: room for one line of MAX_LINE_BYTES with its id and event lines and
# more (a real event is one data line; a whole Responses answer with 100,000
# tokens is under 1 MiB), yet a stream of short data lines that never ends
# its block stops here.  Counted as sent (``data: `` and the LF included),
# so a block of tiny lines holds Python strings of at most about seven times
# this (a two-character line is 8 characters sent, a ~59-byte str kept):
# ~15 MB, not the unbounded buffer that had no limit.
MAX_EVENT_BYTES = 2 << 20
# The one Content-Encoding an event stream is read in: as it was sent.  These bounds hold for the bytes that come,
# so a body an HTTP library inflated first (32 KB of zstd are 1 GiB) passes them before they apply: a reader asks
# for this one, reads the body raw, and refuses any other by name (the client, the proxy's relay).
IDENTITY = "identity"


class SSEError(Exception):
    """Base class of the errors the decoder raises on a bad stream."""


class LineTooLong(SSEError):
    """A line grew beyond the decoder's ``max_line`` bound."""


class EventTooLong(SSEError):
    """An event's block grew beyond the decoder's ``max_event`` bound."""


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched event.

    ``event`` is the type ("message" when the block named none), ``data``
    the data lines joined with LF, ``id`` the last event ID in effect at
    dispatch ("" if none) and ``retry`` the reconnection time in ms in
    effect after this event's lines (None if never set).
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


# ---------------------------------------------------------------- encoder


def _field_error(name: str, value: object) -> TypeError | ValueError:
    """Return the error for a ``name`` value that cannot go on one line."""
    if type(value) is not str:
        return TypeError(f"{name} must be str, got {type(value).__name__}")
    if "\n" in value or "\r" in value:
        return ValueError(f"{name} must not contain CR or LF: {value!r}")
    return ValueError(f"{name} must not contain NUL: {value!r}")


def _data_lines(data: str) -> str:
    """Return ``data`` as ``data:`` lines, splitting on CRLF, CR and LF."""
    lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "".join([f"data: {line}\n" for line in lines])


def encode(
    data: str,
    *,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
) -> bytes:
    """Return one SSE frame as UTF-8 bytes, ending with a blank line.

    Lines come out in the order ``retry``, ``id``, ``event``, then one
    ``data: <line>`` per line of ``data`` (exactly one space after the
    colon, so leading spaces in ``data`` survive).  SSE cannot carry a CR
    in data: CRLF and CR split lines like LF and are decoded back as LF.

    Raises TypeError if ``data``, ``event`` or ``id`` is not a str, and
    ValueError if ``event`` or ``id`` contains CR or LF, ``id`` contains
    NUL, or ``retry`` is not a non-negative int (bool is refused); a lone
    surrogate anywhere raises UnicodeEncodeError, a ValueError too.
    """
    if retry is None and type(data) is str and type(event) is str and type(id) is str:
        # The token-stream case, checked in one pass over the frame: it has
        # exactly four LFs only if no value holds one.
        frame = f"id: {id}\nevent: {event}\ndata: {data}\n\n"
        if frame.count("\n") == 4 and "\r" not in frame and "\0" not in id:
            return frame.encode()
    if type(data) is not str:
        raise _field_error("data", data)
    if "\n" in data or "\r" in data:
        body = _data_lines(data)
    else:
        body = f"data: {data}\n"
    if event is None and id is None and retry is None:
        return f"{body}\n".encode()
    return f"{_header(event, id, retry)}{body}\n".encode()


def _header(event: str | None, id: str | None, retry: int | None) -> str:
    """Return the ``retry``, ``id`` and ``event`` lines, checked."""
    head = ""
    if retry is not None:
        if type(retry) is not int or retry < 0:
            raise ValueError(f"retry must be a non-negative int, got {retry!r}")
        head = f"retry: {retry}\n"
    if id is not None:
        if type(id) is not str or "\n" in id or "\r" in id or "\0" in id:
            raise _field_error("id", id)
        head += f"id: {id}\n"
    if event is not None:
        if type(event) is not str or "\n" in event or "\r" in event:
            raise _field_error("event", event)
        head += f"event: {event}\n"
    return head


def encode_comment(text: str = "ping") -> bytes:
    """Return one comment line, ``b": <text>\\n"``, with no blank line after it.

    Sent between two frames it becomes part of the next frame's block, where
    every decoder ignores it.  Followed by a blank line it would end a block
    of its own, which httpx-sse and the openai SDK's decoder dispatch as an
    event with empty data once any frame has set an id (they dispatch on a
    blank line whenever a last event id is set).

    Raises TypeError if ``text`` is not a str and ValueError if it
    contains CR or LF.
    """
    if type(text) is not str or "\n" in text or "\r" in text:
        raise _field_error("text", text)
    return f": {text}\n".encode()


# ---------------------------------------------------------------- decoder

# One whole event block of the shape real servers send, found in C by
# ``findall``: optional ``retry``, ``id``, ``event``, ``id`` lines, exactly
# one ``data`` line, then the blank line.  Groups: retry digits, id + LF,
# event type, id + LF (the later id wins), data.  An id keeps its LF so that
# "id:" (reset to "") differs from no id line.  An id holding NUL, a retry
# that is not all ASCII digits, a comment, a second data line, an unknown
# field, any other order: the block falls to the second alternative, which
# takes every line up to and including the next blank line (the last
# group) for the line-by-line rules.  Both alternatives end on a blank
# line, so each match starts where a block starts.
_BLOCK = re.compile(
    r"(?:retry: ?([0-9]+)\n)?"
    r"(?:id: ?([^\n\0]*\n))?"
    r"(?:event: ?([^\n]*)\n)?"
    r"(?:id: ?([^\n\0]*\n))?"
    r"data: ?([^\n]*)\n\n"
    r"|((?:[^\n]+\n)*\n)"
)

# Fields a block may hold, each at most once, to take the column path.
_COLUMN_FIELDS = ("data", "id", "event")


class _EventBuilder:
    """Same slot layout as :class:`Event`, but mutable.

    The frozen dataclass ``__init__`` calls ``object.__setattr__`` four
    times (about 0.5 us, the largest cost per decoded event); the decoder
    instead fills one of these and then sets its ``__class__`` to ``Event``,
    which Python allows because the two layouts are identical.
    """

    __slots__ = ("event", "data", "id", "retry")
    event: str
    data: str
    id: str
    retry: int | None


assert _EventBuilder.__slots__ == Event.__slots__


def _make_event(etype: str, data: str, id: str, retry: int | None) -> Event:
    """Return ``Event(etype, data, id, retry)``, built the fast way."""
    ev = _EventBuilder()
    ev.event = etype
    ev.data = data
    ev.id = id
    ev.retry = retry
    ev.__class__ = Event  # type: ignore[assignment]
    return ev  # type: ignore[return-value]


def _parse_retry(value: str, current: int | None) -> int | None:
    """Return the new reconnection time for a ``retry`` field value.

    Only a non-empty string of ASCII digits counts; anything else leaves
    ``current`` in place.  So does a number too long for ``int()`` (past
    Python's int/str digit limit), the only value the spec allows that
    cannot be represented here.
    """
    if value.isascii() and value.isdigit():
        try:
            return int(value)
        except ValueError:
            return current
    return current


def _template(block: str, fixed_event: bool) -> tuple[list[str], list[str], str] | None:
    """Return ``(separators, kinds, event_type)`` for one block, or None.

    ``block`` (no blank line) must be ``name: value`` lines with names from
    ``_COLUMN_FIELDS``, each at most once, ``data`` among them.  ``kinds``
    names the lines whose values vary, in order; ``separators`` is the text
    around them: before the first value, between values, and closing the
    block (``len(kinds) + 1`` strings).  With ``fixed_event`` the event line
    is taken as the same in every block: it joins the separators and its
    value is returned as ``event_type`` ("" when there is none).
    """
    seps: list[str] = []
    kinds: list[str] = []
    seen: list[str] = []
    fixed = ""
    etype = ""
    for line in block.split("\n"):
        name, colon, value = line.partition(": ")
        if not colon or name in seen or name not in _COLUMN_FIELDS:
            return None
        seen.append(name)
        if name == "event" and fixed_event:
            fixed += line + "\n"
            etype = value
        else:
            seps.append(fixed + name + ": ")
            kinds.append(name)
            fixed = "\n"
    if "data" not in seen:
        return None
    seps.append(fixed + "\n")
    return seps, kinds, etype


def _split_blocks(region: str, seps: list[str]) -> list[str] | None:
    """Return the values of ``region`` read as blocks of ``seps``, or None.

    Every separator between two values is replaced by a bare LF and the
    text split on LF, so no value can hold an LF; the blocks are then
    rebuilt from the values and compared with ``region``, so a region of
    any other shape gives None.
    """
    head, tail = seps[0], seps[-1]
    if not (region.startswith(head) and region.endswith(tail)):
        return None
    body = region[len(head) : len(region) - len(tail)]
    joints = seps[1:-1] + [tail + head]
    for joint in joints:
        body = body.replace(joint, "\n")
    values = body.split("\n")
    count, extra = divmod(len(values), len(joints))
    if extra:
        return None
    parts: list[str] = []
    for sep in seps[:-1]:
        parts += (sep, "")
    parts.append(tail)
    parts *= count
    width = len(parts) // count
    for j in range(len(joints)):
        parts[2 * j + 1 :: width] = values[j :: len(joints)]
    return values if "".join(parts) == region else None


def _without_comments(region: str) -> str:
    """Return ``region`` (whole blocks) without its comment lines.

    What is left of a comment-only block is a second blank line after a
    blank line; at a block boundary that dispatches nothing and commits
    the ID that the first one committed, so runs of blank lines are
    collapsed too, and blank lines at the start dropped.
    """
    text = "\n" + region
    kept: list[str] = []
    start = 0
    while (cut := text.find("\n:", start)) >= 0:
        kept.append(text[start:cut])
        start = text.find("\n", cut + 1)  # the LF ending the comment
    kept.append(text[start:])
    text = "".join(kept)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.lstrip("\n")


def _columnize(region: str) -> tuple[dict[str, list[str]], str] | None:
    """Return ``region``'s blocks as columns by field name, or None.

    ``region`` is whole blocks, starting at a block boundary.  The event
    line is tried as fixed first (its type is returned too); failing that,
    the blocks are tried again without comment lines if they hold any, and
    with the event line as a column of its own.  A NUL anywhere opts out,
    since an id holding one must be ignored.
    """
    if "\0" in region:
        return None
    found = _one_shape(region, fixed_event=True)
    if found is None and (region[0] == ":" or "\n:" in region):
        region = _without_comments(region)
        found = _one_shape(region, fixed_event=True)
    return found if found is not None else _one_shape(region, fixed_event=False)


def _one_shape(region: str, fixed_event: bool) -> tuple[dict[str, list[str]], str] | None:
    """Return ``region``'s columns if all its blocks have its first one's shape."""
    first = region[: region.find("\n\n")]
    if not fixed_event and not (first.startswith("event: ") or "\nevent: " in first):
        return None  # no event line: the same shape as with fixed_event
    shape = _template(first, fixed_event)
    if shape is None:
        return None
    values = _split_blocks(region, shape[0])
    if values is None:
        return None
    kinds = shape[1]
    return {k: values[i :: len(kinds)] for i, k in enumerate(kinds)}, shape[2]


# A block shape for the run path: separators, kinds, event type (as
# ``_template`` returns them) and the compiled pattern of one or more
# consecutive blocks of that shape.
_Shape = tuple[list[str], list[str], str, "re.Pattern[str]"]
# Shapes by separators.  A stream has a handful; the bound only keeps a
# stream of ever-new event names from growing the table.
_SHAPES: dict[tuple[str, ...], _Shape] = {}
_MAX_SHAPES = 64


def _shape(seps: list[str], kinds: list[str], etype: str) -> _Shape:
    """Return the shape of ``seps``, compiling its run pattern once."""
    key = tuple(seps)
    shape = _SHAPES.get(key)
    if shape is None:
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        pattern = re.compile("(?:" + "[^\\n]*".join(re.escape(sep) for sep in seps) + ")+")
        shape = _SHAPES[key] = (seps, kinds, etype, pattern)
    return shape


# Below this many characters of whole blocks, skip the column path: its
# fixed cost is larger than the regex's for one or two token frames.
_COLUMNS_MIN = 512


class Decoder:
    """Incremental SSE decoder: bytes in, :class:`Event` objects out.

    ``last_event_id`` is the last event ID string (what a client sends back
    as Last-Event-ID); it changes only when a block is dispatched.
    ``retry`` is the reconnection time in ms, None until a stream sets it.
    A block still open when the input ends is never dispatched.  After an
    :class:`SSEError` the decoder's state is unspecified: discard it.
    A client that reconnects makes a new decoder with the ``last_event_id``
    and ``retry`` of the old one: the spec keeps both across connections.
    """

    __slots__ = (
        "_max_line",
        "_max_event",
        "_block_len",
        "_utf8",
        "_cr",
        "_tail",
        "_tail_len",
        "_in_block",
        "_data",
        "_type",
        "_id_buf",
        "_last_event_id",
        "_retry",
        "_last_shape",
    )

    def __init__(self, max_line: int = MAX_LINE_BYTES, *, max_event: int = MAX_EVENT_BYTES,
                 last_event_id: str = "", retry: int | None = None) -> None:
        """Make a decoder whose lines may hold at most ``max_line`` chars, its events ``max_event``.

        ``last_event_id`` and ``retry`` are where an earlier connection left
        them.  Raises ValueError if ``max_line`` or ``max_event`` is not an
        int of at least 1, ``last_event_id`` holds CR, LF or NUL (no stream
        can set one that does) or ``retry`` is not None or a non-negative
        int, and TypeError if ``last_event_id`` is not a str.
        """
        if type(max_line) is not int or max_line < 1:
            raise ValueError(f"max_line must be an int >= 1, got {max_line!r}")
        if type(max_event) is not int or max_event < 1:
            raise ValueError(f"max_event must be an int >= 1, got {max_event!r}")
        if type(last_event_id) is not str or any(c in last_event_id for c in "\r\n\0"):
            raise _field_error("last_event_id", last_event_id)
        if retry is not None and (type(retry) is not int or retry < 0):
            raise ValueError(f"retry must be a non-negative int, got {retry!r}")
        self._max_line = max_line
        self._max_event = max_event
        self._block_len = 0  # characters of the open block's whole lines so far
        self._utf8 = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._cr = False  # the last text seen ended with a CR
        self._tail: list[str] = []  # pieces of the incomplete last line
        self._tail_len = 0
        self._in_block = False  # the last whole line seen was not blank
        self._data: list[str] = []  # data buffer, one item per data line
        self._type = ""  # event type buffer
        self._id_buf = last_event_id  # last event ID buffer
        self._last_event_id = last_event_id
        self._retry = retry
        self._last_shape: _Shape | None = None  # of the last run of blocks, tried first

    @property
    def last_event_id(self) -> str:
        """Return the last event ID string committed by a dispatch."""
        return self._last_event_id

    @property
    def retry(self) -> int | None:
        """Return the reconnection time in ms, or None if never set."""
        return self._retry

    def feed(self, chunk: bytes) -> list[Event]:
        """Return the events completed by ``chunk`` (often an empty list).

        Raises LineTooLong if a line, complete or not, exceeds ``max_line``
        characters, and EventTooLong if an event's block (its whole lines,
        line ends included, dispatched or not) exceeds ``max_event``; no
        line of that chunk is interpreted then.
        """
        text = self._lf_text(chunk)
        cut = text.rfind("\n") + 1
        if not cut:
            if text:
                self._hold(text)
            return []
        lines = self._complete(text[:cut])
        if self._block_len + len(lines) > self._max_event:  # _interpret carries _block_len on
            self._measure_blocks(lines)
        self._tail = []
        self._tail_len = 0
        if cut < len(text):
            self._hold(text[cut:])
        return self._interpret(lines)

    def _lf_text(self, chunk: bytes) -> str:
        """Return ``chunk`` decoded, with every line end turned into LF."""
        text = self._utf8.decode(chunk)
        if self._cr and text:
            self._cr = False
            if text[0] == "\n":  # second half of a CRLF split across chunks
                text = text[1:]
        if "\r" in text:
            self._cr = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        return text

    def _hold(self, text: str) -> None:
        """Keep ``text`` as part of the incomplete line; raise if too long."""
        size = self._tail_len + len(text)
        if size > self._max_line:
            raise self._too_long(size)
        self._tail.append(text)
        self._tail_len = size

    def _complete(self, text: str) -> str:
        """Return held-back text + ``text`` (whole lines); check lengths."""
        if self._tail:
            self._tail.append(text)
            text = "".join(self._tail)
        if len(text) > self._max_line:
            longest = max(map(len, text.split("\n")))
            if longest > self._max_line:
                raise self._too_long(longest)
        return text

    def _measure_blocks(self, text: str) -> None:
        """Raise EventTooLong if a block of ``text`` (the open one included) is too long."""
        held, pos = self._block_len, 0  # pos: where the current block starts in text
        while True:
            if text.startswith("\n", pos):  # pos is at a line start: a blank line
                blank = pos
            else:
                blank = text.find("\n\n", pos) + 1  # the blank line after a line; 0 if none
                if not blank:
                    break
            if held + blank - pos > self._max_event:
                raise self._event_too_long(held + blank - pos)
            held, pos = 0, blank + 1
        if held + len(text) - pos > self._max_event:
            raise self._event_too_long(held + len(text) - pos)

    def _event_too_long(self, size: int) -> EventTooLong:
        """Return the error for an event block of ``size`` characters so far."""
        return EventTooLong(
            f"SSE event longer than max_event={self._max_event} characters"
            f" (saw {size})"
        )

    def _too_long(self, size: int) -> LineTooLong:
        """Return the error for a line of ``size`` characters."""
        return LineTooLong(
            f"SSE line longer than max_line={self._max_line} characters"
            f" (saw {size})"
        )

    def _interpret(self, text: str) -> list[Event]:
        """Apply the rules to ``text`` (whole lines); return dispatches.

        A block begun in an earlier chunk is finished line by line.  The
        whole blocks after it go through :meth:`_columns` if they all have
        one shape, else :meth:`_blocks`; the lines after the last blank
        line go through :meth:`_lines` again.
        """
        events: list[Event] = []
        marked = "\n" + text  # a blank first line shows as "\n\n" too
        start = 0
        if self._in_block:
            start = marked.find("\n\n") + 1 or len(text)
            self._lines(text[:start], events)
        end = marked.rfind("\n\n") + 1  # just past the last blank line
        self._block_len = len(text) - end if end else self._block_len + len(text)
        if end > start:
            # Bulk columns pay off over many blocks; a chunk of one or two
            # frames (a reader fed frame by frame) is quicker by regex.
            if end - start < _COLUMNS_MIN:
                self._blocks(text, start, end, events)
            else:
                self._region(text[start:end], events)
            start = end
        if start < len(text):
            self._lines(text[start:], events)
        return events

    def _columns(self, region: str, events: list[Event]) -> bool:
        """Dispatch ``region`` (whole blocks) in bulk if it has one shape.

        Returns False, having done nothing, when it has not.
        """
        found = _columnize(region)
        if found is None:
            return False
        self._emit(*found, events)
        return True

    def _emit(self, columns: dict[str, list[str]], fixed_type: str, events: list[Event]) -> None:
        """Dispatch one event per row of ``columns`` (values by field name)."""
        ids = columns.get("id") or repeat(self._id_buf)
        types = columns.get("event") or repeat(fixed_type)
        retry = self._retry
        append = events.append
        builder = _EventBuilder
        event_cls = Event
        for etype, data, id_ in zip(types, columns["data"], ids):  # noqa: B905 - ids and types may be repeat()
            ev = builder()  # _make_event, inlined: this loop is the hot path
            ev.event = etype or "message"
            ev.data = data
            ev.id = id_
            ev.retry = retry
            ev.__class__ = event_cls  # type: ignore[assignment]
            append(ev)  # type: ignore[arg-type]
        if "id" in columns:
            self._id_buf = columns["id"][-1]
        self._last_event_id = self._id_buf

    def _region(self, region: str, events: list[Event]) -> None:
        """Dispatch ``region`` (whole blocks, many of them).

        If every block has as many lines as the first (two counts in C) the
        region is tried in bulk; otherwise, or if that fails, it is cut into
        runs: each run of two or more blocks of one shape goes through the
        column path, the blocks between runs through :meth:`_blocks`.  So one
        odd block (a paragraph-break token, whose data spans lines; a ping;
        the ``open`` frame) costs itself, not the column path of its chunk.
        """
        first = region.find("\n\n")
        if region.count("\n") == (region.count("\n", 0, first) + 2) * region.count("\n\n"):
            if self._columns(region, events):
                return
        pos, size = 0, len(region)
        odd = -1  # start of the blocks waiting for _blocks; -1 if none
        while pos < size:
            stop = region.find("\n\n", pos)
            end = stop + 2 if stop >= 0 else size
            shape = None
            if stop > pos:
                end, shape = self._run_end(region, pos, stop)
            if shape is None:
                if odd < 0:
                    odd = pos
                pos = end
                continue
            if odd >= 0:
                self._blocks(region, odd, pos, events)
                odd = -1
            values = _split_blocks(region[pos:end], shape[0])
            if values is None:  # never for a matched run; the rules decide if it happens
                self._blocks(region, pos, end, events)
            else:
                kinds = shape[1]
                self._emit({k: values[i :: len(kinds)] for i, k in enumerate(kinds)}, shape[2], events)
            pos = end
        if odd >= 0:
            self._blocks(region, odd, size, events)

    def _run_end(self, region: str, pos: int, stop: int) -> tuple[int, _Shape | None]:
        """Return where the run of blocks shaped like the one at ``pos`` ends, and its shape.

        ``stop`` is where that block's blank line starts.  A run of one
        block, or a block of no column shape, gives ``(stop + 2, None)``.
        The last run's shape is tried first, then the block's own (event
        line fixed, then as a column).  A value may hold NUL in a matched
        run; NUL opts the run out, as it does a region.
        """
        single = stop + 2
        last = self._last_shape
        if last is not None:
            match = last[3].match(region, pos)
            if match is not None and match.end() > single:
                return self._no_nul(region, pos, match.end(), last)
        first = region[pos:stop]
        for fixed_event in (True, False):
            if not fixed_event and not (first.startswith("event: ") or "\nevent: " in first):
                break
            found = _template(first, fixed_event)
            if found is None:
                break
            shape = _shape(*found)
            match = shape[3].match(region, pos)
            if match is not None and match.end() > single:
                self._last_shape = shape
                return self._no_nul(region, pos, match.end(), shape)
        return single, None

    @staticmethod
    def _no_nul(region: str, pos: int, end: int, shape: _Shape) -> tuple[int, _Shape | None]:
        return (end, None) if region.find("\0", pos, end) >= 0 else (end, shape)

    def _blocks(self, text: str, start: int, end: int, events: list[Event]) -> None:
        """Dispatch the whole blocks in ``text[start:end]`` into ``events``."""
        append = events.append
        builder = _EventBuilder
        event_cls = Event
        id_buf = self._id_buf
        retry = self._retry
        for r, id1, etype, id2, data, other in _BLOCK.findall(text, start, end):
            if other:
                self._id_buf = id_buf
                self._retry = retry
                self._lines(other, events)
                id_buf = self._id_buf
                retry = self._retry
                continue
            if r:
                retry = _parse_retry(r, retry)
            if id2:
                id_buf = id2[:-1]
            elif id1:
                id_buf = id1[:-1]
            ev = builder()  # _make_event, inlined
            ev.event = etype or "message"
            ev.data = data
            ev.id = id_buf
            ev.retry = retry
            ev.__class__ = event_cls  # type: ignore[assignment]
            append(ev)  # type: ignore[arg-type]
        self._id_buf = id_buf
        self._last_event_id = id_buf
        self._retry = retry

    def _lines(self, text: str, events: list[Event]) -> None:
        """Apply the field rules to each line of ``text`` (ends in LF)."""
        data = self._data
        etype = self._type
        id_buf = self._id_buf
        last_id = self._last_event_id
        retry = self._retry
        for line in text[:-1].split("\n"):
            if not line:  # blank line: dispatch
                last_id = id_buf
                if data:
                    joined = "\n".join(data)
                    events.append(_make_event(etype or "message", joined, last_id, retry))
                    data = []
                etype = ""
                continue
            name, _, value = line.partition(":")  # a comment gives name ""
            if value[:1] == " ":
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "id":
                if "\0" not in value:
                    id_buf = value
            elif name == "event":
                etype = value
            elif name == "retry":
                retry = _parse_retry(value, retry)
        self._in_block = bool(line)
        self._data = data
        self._type = etype
        self._id_buf = id_buf
        self._last_event_id = last_id
        self._retry = retry


def compressed(content_encoding: str) -> str:
    """The encoding a ``Content-Encoding`` header names if it says the body is compressed (anything but none or
    ``identity``), else ""."""
    encoding = content_encoding.strip()
    return "" if encoding.lower() in ("", IDENTITY) else encoding


def not_compressed(encoding: str, what: str) -> str:
    """How a refusal of a compressed ``what`` (``"an SSE stream"``) names its ``encoding``, after the status."""
    return f"Content-Encoding {encoding!r}; tokenwire asks for {IDENTITY} ({what} is not compressed)"


def not_read(encoding: str) -> str:
    """What an error says in place of a refusal's body compressed in ``encoding`` (it is never inflated)."""
    return f"a body in Content-Encoding {encoding!r}, not read (tokenwire asks for {IDENTITY})"
