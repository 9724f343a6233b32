"""The SSE decoder's reference and what the property and fuzz tests of ``tokenwire.core.sse`` draw; no tests here.

``reference(wire)`` is the WHATWG event stream interpretation transcribed step by step, which the decoder must
agree with; ``decode`` feeds chunks to a fresh decoder, ``split`` cuts bytes at offsets.  ``sse_ish_bytes`` and
``sse_streams`` are the inputs (raw bytes made of the format's pieces, and streams of blocks with odd lines mixed
in); ``FUZZ_INPUTS`` and ``decoder_raises_only_sse_errors`` are the fuzz property, run briefly in the fast loop
(``unit/test_sse.py``) and at length as a load test (``load/test_sse_fuzz.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hypothesis import strategies as st

from tokenwire.core.sse import MAX_LINE_BYTES, Decoder, Event, SSEError

Outcome = tuple[list[Event], str, int | None]


def decode(chunks: Iterable[bytes], max_line: int = MAX_LINE_BYTES) -> Outcome:
    """Feed ``chunks`` to a new decoder; return events, last id, retry."""
    decoder = Decoder(max_line)
    events: list[Event] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events, decoder.last_event_id, decoder.retry


def split(blob: bytes, cuts: Iterable[int]) -> list[bytes]:
    """Return ``blob`` cut at the given offsets (clamped, empty pieces kept)."""
    points = sorted(min(max(c, 0), len(blob)) for c in cuts)
    return [blob[a:b] for a, b in zip([0, *points], [*points, len(blob)], strict=True)]


_LINE_END = re.compile(r"\r\n|\r|\n")


def reference(wire: bytes) -> Outcome:
    """The WHATWG event stream interpretation, transcribed step by step."""
    text = wire.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    data, etype, id_buf, last_id = "", "", "", ""
    retry: int | None = None
    events: list[Event] = []
    for line in _LINE_END.split(text)[:-1]:  # the last piece has no line end
        if line == "":
            last_id = id_buf
            if data:
                events.append(Event(etype or "message", data.removesuffix("\n"), last_id, retry))
            data, etype = "", ""
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            etype = value
        elif name == "data":
            data += value + "\n"
        elif name == "id" and "\0" not in value:
            id_buf = value
        elif name == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    return events, last_id, retry


_BYTE_PIECES = [b"data", b"id", b"event", b"retry", b":", b" ", b"\n", b"\r", b"\r\n"]
_BYTE_PIECES += [b"\xef\xbb\xbf", b"\xff", b"\xe2\x82", b"\xac", b"0", b"7", b"x", b"\x00", b"\t"]
sse_ish_bytes = st.one_of(
    st.binary(max_size=300),
    st.lists(st.sampled_from(_BYTE_PIECES), max_size=120).map(b"".join),
)

_odd_chars = st.sampled_from(["\u2028", "\x85", "\ufeff", "\x0b", "\x0c", "\x00", " ", ":"])
_value = st.text(st.characters(exclude_characters="\r\n", max_codepoint=0x2FF) | _odd_chars, max_size=6)
_line = st.one_of(
    _value.map(lambda v: f"data: {v}"),
    _value.map(lambda v: f"data:{v}"),
    _value.map(lambda v: f"id: {v}"),
    st.sampled_from(["event: token", "event: token", "event: x", "event:", "id:"]),
    st.integers(0, 10**6).map(lambda n: f"retry: {n}"),
    st.sampled_from([": ping", "data", "id", "retry: 1x", "Data: y", "foo: bar", "\ufeff"]),
)
_shape_values = {
    "data": _value,
    "event": st.sampled_from(["token", "token", ""]),
    "id": st.integers(0, 99).map(str),
}
_shape = st.lists(st.sampled_from(["id", "event", "data"]), min_size=1, max_size=3, unique=True)


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    """A stream of blocks, often of one repeated shape, with odd lines mixed in."""
    shape = draw(_shape)
    blocks = []
    for _ in range(draw(st.integers(0, 15))):
        lines = [f"{name}: {draw(_shape_values[name])}" for name in shape]
        if draw(st.integers(0, 5)) == 0:  # now and then, an odd line or two
            lines += draw(st.lists(_line, max_size=2))
        if draw(st.integers(0, 7)) == 0:  # or a missing one
            del lines[draw(st.integers(0, len(lines) - 1))]
        blocks.append("\n".join([*lines, "", ""]))
    text = "".join(blocks) + "\n".join(draw(st.lists(_line, max_size=3)))
    if draw(st.booleans()):
        text = text.replace("\n", draw(st.sampled_from(["\r\n", "\r"])))
    return text.encode()


# The fuzz property's inputs: bytes, how they are cut, and the decoder's line bound (tiny ones included).
FUZZ_INPUTS = (
    st.one_of(sse_ish_bytes, sse_streams()),
    st.lists(st.integers(0, 400), max_size=8),
    st.sampled_from([1, 2, 7, 16, 64, MAX_LINE_BYTES]),
)


def decoder_raises_only_sse_errors(wire: bytes, cuts: list[int], max_line: int) -> None:
    """The decoder fed ``wire`` cut at ``cuts`` gives events or an ``SSEError`` for a line past ``max_line``; with the
    default bound, what the reference gives."""
    decoder = Decoder(max_line)
    events: list[Event] = []
    try:
        for chunk in split(wire, cuts):
            events += decoder.feed(chunk)
    except SSEError:
        assert max_line < len(wire)
        return
    assert all(type(e) is Event for e in events)
    if max_line == MAX_LINE_BYTES:
        assert (events, decoder.last_event_id, decoder.retry) == reference(wire)
