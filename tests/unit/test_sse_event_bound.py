"""The SSE decoder bounds an event as it bounds a line: ``max_event`` characters of one block, by name.

An upstream that sends short ``data`` lines and never a blank line used to
grow the decoder's data buffer without end (the event only failed, if ever,
when it closed).  Now the block's length is carried from chunk to chunk and
the decoder raises ``EventTooLong`` once it passes ``max_event``, before
interpreting the chunk that passed it, whatever the chunking; the proxy's
upstream reader and the client name it.
"""

from __future__ import annotations

import re
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwire.client.reconnect import ProtocolError, Reconnect
from tokenwire.core.sse import MAX_EVENT_BYTES, MAX_LINE_BYTES, Decoder, Event, EventTooLong, SSEError
from tokenwire.upstream import UpstreamFrames, UpstreamMalformed

# 50 MB of two-character data lines, as the probe sent: one 64 KiB chunk fed again and again.
LINE = b"data: xy\n"
CHUNK = LINE * (65536 // len(LINE))
HOSTILE_BYTES = 50_000_000
# What the decoder may hold for such a stream, in Python objects, while it reads it: the bound's
# characters as ~59-byte str objects (one per 9-character line) are about 14 MB.
HELD_LIMIT_BYTES = 32 << 20


def feed_all(decoder: Decoder, chunks: list[bytes]) -> list[Event]:
    events: list[Event] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events


def test_50_mb_of_short_data_lines_without_a_blank_line_fail_by_name_with_the_buffer_bounded() -> None:
    decoder = Decoder()
    fed = 0
    tracemalloc.start()
    try:
        with pytest.raises(EventTooLong) as raised:
            while fed < HOSTILE_BYTES:
                decoder.feed(CHUNK)
                fed += len(CHUNK)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    seen = (fed // len(CHUNK) + 1) * len(CHUNK)
    assert str(raised.value) == f"SSE event longer than max_event=2097152 characters (saw {seen})"
    assert isinstance(raised.value, SSEError)
    assert fed < MAX_EVENT_BYTES <= fed + len(CHUNK)      # it stopped at the first chunk past the bound
    assert peak < HELD_LIMIT_BYTES


def test_the_bound_is_the_blocks_characters_line_ends_included_whatever_the_chunking() -> None:
    block = b"id: 7\nevent: e\n: a comment\n" + b"data: ab\n" * 10      # 6 + 9 + 12 + 90 = 117 characters
    stream = b"data: first\n\n" + block + b"\n" + b"data: last\n\n"
    for size in (1, 2, 3, 7, 50, len(stream)):
        chunks = [stream[i:i + size] for i in range(0, len(stream), size)]
        assert [e.data for e in feed_all(Decoder(max_event=117), chunks)] == ["first", "ab\n" * 9 + "ab", "last"]
        with pytest.raises(EventTooLong, match=r"^SSE event longer than max_event=116 characters \(saw 117\)$"):
            feed_all(Decoder(max_event=116), chunks)


def test_many_events_are_no_one_event() -> None:
    frames = [b"data: ab\ndata: cd\n\n"] * 10_000                 # 190 KB, each block 18 characters
    assert len(feed_all(Decoder(max_event=18), frames)) == 10_000
    assert len(feed_all(Decoder(max_event=18), [b"".join(frames)])) == 10_000


def test_a_user_who_needs_more_sets_max_event() -> None:
    big = b"data: " + b"x" * (MAX_LINE_BYTES - 6) + b"\n"          # lines as long as max_line allows
    stream = big * 3 + b"\n"
    with pytest.raises(EventTooLong):
        Decoder().feed(stream)
    (event,) = Decoder(max_event=4 * MAX_LINE_BYTES).feed(stream)
    assert len(event.data) == 3 * (MAX_LINE_BYTES - 6) + 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_max_event_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match=rf"^max_event must be an int >= 1, got {re.escape(repr(bad))}$"):
        Decoder(max_event=bad)  # type: ignore[arg-type]


_LINE_END = re.compile(r"\r\n|\r|\n")


def longest_block(wire: bytes) -> int:
    """The longest block of ``wire``, as characters of its whole lines, line ends (as LF) included."""
    text = wire.decode("utf-8", "replace").removeprefix("\ufeff")
    longest = size = 0
    for line in _LINE_END.split(text)[:-1]:
        size = 0 if line == "" else size + len(line) + 1
        longest = max(longest, size)
    return longest


PIECES = st.sampled_from([b"data: ab\n", b"data:\n", b"\n", b"\r\n", b"\r", b": ping\n", b"id: 3\n",
                          b"event: t\n", b"retry: 5\n", b"data: \xc3\xa9\n", b"x"])


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=40), st.integers(1, 60), st.lists(st.integers(0, 400), max_size=6))
def test_it_raises_exactly_when_a_block_passes_the_bound(pieces: list[bytes], bound: int, cuts: list[int]) -> None:
    wire = b"".join(pieces)
    points = sorted(min(c, len(wire)) for c in cuts)
    chunks = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    if longest_block(wire) > bound:
        with pytest.raises(EventTooLong):
            feed_all(Decoder(max_event=bound), chunks)
    else:
        assert feed_all(Decoder(max_event=bound), chunks) == feed_all(Decoder(), [wire])


def test_the_proxys_upstream_reader_names_the_bound() -> None:
    frames = UpstreamFrames()
    with pytest.raises(UpstreamMalformed) as raised:
        for _ in range(HOSTILE_BYTES // len(CHUNK)):
            frames.feed(CHUNK)
    assert str(raised.value).startswith("the upstream's event stream cannot be read: "
                                        "SSE event longer than max_event=2097152 characters (saw ")


def test_the_client_names_the_bound() -> None:
    state = Reconnect("http://127.0.0.1:1/streams/abc/events")
    state.request()
    state.opened("text/event-stream")
    with pytest.raises(ProtocolError) as raised:
        for _ in range(HOSTILE_BYTES // len(CHUNK)):
            state.feed(CHUNK)
    assert re.fullmatch(r"/streams/abc/events: SSE event longer than max_event=2097152 characters \(saw \d+\)",
                        str(raised.value))
