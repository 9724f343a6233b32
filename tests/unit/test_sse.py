"""The SSE encoder and decoder (``tokenwire.core.sse``): the shared vectors, the errors, properties against the
WHATWG reference (``support.sse_reference``), and a brief fuzz (the long one: ``load/test_sse_fuzz.py``)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.sse_reference import (
    FUZZ_INPUTS,
    Outcome,
    decode,
    decoder_raises_only_sse_errors,
    reference,
    split,
    sse_ish_bytes,
    sse_streams,
)
from support.sse_vectors import VECTORS, Vector

from tokenwire.core.sse import (
    MAX_LINE_BYTES,
    Decoder,
    Event,
    LineTooLong,
    SSEError,
    encode,
    encode_comment,
)

# The fuzz test's examples here, in the fast loop; the long fuzz (load/test_sse_fuzz.py) runs
# $TOKENWIRE_FUZZ_EXAMPLES of them (10,000 by default, as in CI).
QUICK_FUZZ_EXAMPLES = 300

def expected(vector: Vector) -> Outcome:
    """Return a vector's expected outcome with the events as ``Event``."""
    _, _, _, events, last_id, retry = vector
    return [Event(*e) for e in events], last_id, retry


VECTOR_IDS = [v[0] for v in VECTORS]
ENCODER_VECTORS = [v for v in VECTORS if v[1] is not None]


# ---------------------------------------------------------------- vectors
@pytest.mark.parametrize("vector", VECTORS, ids=VECTOR_IDS)
def test_decode_vector_whole(vector: Vector) -> None:
    assert decode([vector[2]]) == expected(vector)


@pytest.mark.parametrize("vector", VECTORS, ids=VECTOR_IDS)
def test_decode_vector_byte_by_byte(vector: Vector) -> None:
    wire = vector[2]
    assert decode(wire[i : i + 1] for i in range(len(wire))) == expected(vector)


@pytest.mark.parametrize("vector", VECTORS, ids=VECTOR_IDS)
def test_decode_vector_split_everywhere(vector: Vector) -> None:
    wire = vector[2]
    for cut in range(len(wire) + 1):
        assert decode([wire[:cut], wire[cut:]]) == expected(vector), cut


@pytest.mark.parametrize("vector", VECTORS, ids=VECTOR_IDS)
def test_reference_agrees_with_vector(vector: Vector) -> None:
    assert reference(vector[2]) == expected(vector)


@pytest.mark.parametrize("vector", ENCODER_VECTORS, ids=[v[0] for v in ENCODER_VECTORS])
def test_encode_vector(vector: Vector) -> None:
    kwargs = vector[1]
    assert kwargs is not None
    assert encode(**kwargs) == vector[2]


def test_vector_table_covers_encoder_and_decoder() -> None:
    assert len(ENCODER_VECTORS) >= 15
    assert len(VECTORS) - len(ENCODER_VECTORS) >= 40


# ---------------------------------------------------------------- encoder
@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((b"x",), {}, TypeError, "data must be str, got bytes"),
        ((None,), {}, TypeError, "data must be str, got NoneType"),
        ((b"x",), {"event": "e", "id": "1"}, TypeError, "data must be str, got bytes"),
        (("x",), {"event": 1}, TypeError, "event must be str, got int"),
        (("x",), {"event": b"e", "id": "1"}, TypeError, "event must be str, got bytes"),
        (("x",), {"id": 5}, TypeError, "id must be str, got int"),
        (("x",), {"event": "e", "id": 5}, TypeError, "id must be str, got int"),
        (("x",), {"event": "a\nb"}, ValueError, "event must not contain CR or LF: 'a\\nb'"),
        (("x",), {"event": "a\rb", "id": "1"}, ValueError, "event must not contain CR or LF: 'a\\rb'"),
        (("x",), {"id": "a\nb"}, ValueError, "id must not contain CR or LF: 'a\\nb'"),
        (("x",), {"event": "e", "id": "a\r\nb"}, ValueError, "id must not contain CR or LF: 'a\\r\\nb'"),
        (("x",), {"id": "a\x00b"}, ValueError, "id must not contain NUL: 'a\\x00b'"),
        (("x",), {"event": "e", "id": "\x00"}, ValueError, "id must not contain NUL: '\\x00'"),
        (("x",), {"retry": -1}, ValueError, "retry must be a non-negative int, got -1"),
        (("x",), {"retry": True}, ValueError, "retry must be a non-negative int, got True"),
        (("x",), {"retry": 1.5}, ValueError, "retry must be a non-negative int, got 1.5"),
        (("x",), {"retry": "5", "event": "e", "id": "1"}, ValueError, "retry must be a non-negative int, got '5'"),
    ],
)
def test_encode_errors(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        encode(*args, **kwargs)


def test_encode_refuses_lone_surrogates() -> None:
    with pytest.raises(UnicodeEncodeError):  # a ValueError: UTF-8 cannot carry it
        encode("\ud800", event="e", id="1")


def test_encode_is_keyword_only_after_data() -> None:
    with pytest.raises(TypeError):
        encode("x", "event")  # type: ignore[call-arg]


def test_encode_comment_is_one_line_with_no_blank_line_after_it() -> None:
    assert encode_comment() == b": ping\n"
    assert encode_comment("keep-alive 3") == b": keep-alive 3\n"
    assert encode_comment("") == b": \n"
    assert encode_comment("é") == ": é\n".encode()
    assert decode([encode_comment(), encode("x")]) == ([Event("message", "x")], "", None)
    frames = [encode("a", event="token", id="0"), encode_comment(), encode_comment(),
              encode("b", event="token", id="1")]
    assert decode(frames) == ([Event("token", "a", "0"), Event("token", "b", "1")], "1", None)


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("a\nb", ValueError, "text must not contain CR or LF: 'a\\nb'"),
        ("a\r", ValueError, "text must not contain CR or LF: 'a\\r'"),
        (5, TypeError, "text must be str, got int"),
    ],
)
def test_encode_comment_errors(text: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        encode_comment(text)


# ---------------------------------------------------------------- Event
def test_event_is_a_frozen_slotted_dataclass() -> None:
    assert [f.name for f in dataclasses.fields(Event)] == ["event", "data", "id", "retry"]
    assert Event() == Event("message", "", "", None)
    (decoded,), _, _ = decode([b"id: 1\nevent: e\ndata: x\n\n"])
    assert type(decoded) is Event
    assert decoded == Event(event="e", data="x", id="1", retry=None)
    assert repr(decoded) == "Event(event='e', data='x', id='1', retry=None)"
    assert hash(decoded) == hash(Event("e", "x", "1"))
    assert not hasattr(decoded, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.data = "y"  # type: ignore[misc]
    assert dataclasses.replace(decoded, data="y") == Event("e", "y", "1")


@pytest.mark.parametrize(
    "wire",
    [
        b"data: a\n\ndata: b\n\n",  # one shape for the whole chunk
        b"retry: 5\nid: 1\nevent: e\ndata: a\n\n",  # the block pattern
        b": c\ndata: a\ndata: b\n\n",  # line by line
    ],
)
def test_every_decode_path_gives_real_events(wire: bytes) -> None:
    events, _, _ = decode([wire])
    assert events and all(type(e) is Event for e in events)
    assert all(dataclasses.asdict(e)["data"] == e.data for e in events)


# ---------------------------------------------------------------- decoder
@pytest.mark.parametrize("value", [0, -1, 1.5, "10", None, True])
def test_decoder_rejects_a_bad_max_line(value: Any) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(f'max_line must be an int >= 1, got {value!r}')}$"):
        Decoder(value)


def test_state_is_read_only_and_starts_empty() -> None:
    decoder = Decoder()
    assert (decoder.last_event_id, decoder.retry) == ("", None)
    assert decoder.feed(b"") == []
    with pytest.raises(AttributeError):
        decoder.last_event_id = "x"  # type: ignore[misc]


def test_last_event_id_is_committed_only_at_dispatch() -> None:
    decoder = Decoder()
    assert decoder.feed(b"id: 1\ndata: a\n") == []
    assert decoder.last_event_id == ""
    assert decoder.feed(b"\n") == [Event("message", "a", "1")]
    assert decoder.last_event_id == "1"


def test_a_trailing_cr_dispatches_at_once_and_swallows_the_lf() -> None:
    decoder = Decoder()
    assert decoder.feed(b"data: a\r\r") == [Event("message", "a")]
    assert decoder.feed(b"\ndata: b\r") == []  # the LF ended the CRLF, no empty line
    assert decoder.feed(b"\n\r\n") == [Event("message", "b")]


def test_bom_split_across_chunks_is_stripped() -> None:
    assert decode([b"\xef", b"\xbb", b"\xbfdata: x\n\n"]) == ([Event("message", "x")], "", None)


def test_huge_retry_value_is_ignored_not_raised() -> None:
    wire = b"retry: 5\n\nretry: " + b"9" * 5000 + b"\n\n"
    assert decode([wire]) == ([], "", 5)


def test_max_line_bytes() -> None:
    assert MAX_LINE_BYTES >= 1 << 20
    decoder = Decoder()
    decoder.feed(b"x" * MAX_LINE_BYTES)
    with pytest.raises(LineTooLong):
        decoder.feed(b"x")


# ---------------------------------------------------------------- LineTooLong
def test_line_too_long_in_one_chunk() -> None:
    with pytest.raises(LineTooLong, match=r"^SSE line longer than max_line=16 characters \(saw 17\)$"):
        Decoder(max_line=16).feed(b"data: 0123456789x")


def test_line_too_long_over_many_chunks() -> None:
    decoder = Decoder(max_line=16)
    for _ in range(16):
        assert decoder.feed(b"x") == []
    with pytest.raises(LineTooLong, match=r"^SSE line longer than max_line=16 characters \(saw 18\)$"):
        decoder.feed(b"yy")


def test_line_of_exactly_max_line_is_fine() -> None:
    wire = b"data: 0123456789\n\n"  # a 16-character line
    for cut in range(len(wire) + 1):
        assert decode([wire[:cut], wire[cut:]], max_line=16)[0] == [Event("message", "0123456789")]
    assert decode([b"data: 0123456789\r\r"], max_line=16)[0] == [Event("message", "0123456789")]


def test_a_complete_long_line_fails_however_chunked() -> None:
    wire = b"data: a\n\ndata: 0123456789x\n\n"
    for cut in range(len(wire) + 1):
        with pytest.raises(LineTooLong, match=r"\(saw 17\)$"):
            decode([wire[:cut], wire[cut:]], max_line=16)


def test_max_line_counts_characters_not_bytes() -> None:
    assert decode(["data: ééééé\n\n".encode()], max_line=11)[0] == [Event("message", "ééééé")]
    assert issubclass(LineTooLong, SSEError) and issubclass(SSEError, Exception)


# ---------------------------------------------------------------- properties
@given(st.one_of(sse_streams(), sse_ish_bytes), st.lists(st.integers(0, 400), max_size=8))
def test_any_chunking_gives_the_same_result(wire: bytes, cuts: list[int]) -> None:
    whole = decode([wire])
    assert decode(split(wire, cuts)) == whole
    assert whole == reference(wire)


@settings(max_examples=50)
@given(sse_streams(), st.integers(2, 64))
def test_fixed_size_chunks_match_the_reference(wire: bytes, size: int) -> None:
    assert decode(wire[i : i + size] for i in range(0, len(wire), size)) == reference(wire)


_line_text = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"))
frame_kwargs = st.fixed_dictionaries(
    {"data": st.text(st.characters(codec="utf-8"))},
    optional={
        "event": _line_text,
        "id": _line_text.filter(lambda s: "\0" not in s),
        "retry": st.integers(min_value=0, max_value=2**64),
    },
)


def decoded_as(kwargs: dict[str, Any], last_id: str, retry: int | None) -> Event:
    """The event a conforming client reads for ``encode(**kwargs)``."""
    data = kwargs["data"].replace("\r\n", "\n").replace("\r", "\n")
    return Event(kwargs.get("event") or "message", data, kwargs.get("id", last_id), kwargs.get("retry", retry))


@given(frame_kwargs)
def test_encode_then_decode_round_trips(kwargs: dict[str, Any]) -> None:
    events, last_id, retry = decode([encode(**kwargs)])
    assert events == [decoded_as(kwargs, "", None)]
    assert (last_id, retry) == (kwargs.get("id", ""), kwargs.get("retry"))


@given(st.lists(frame_kwargs, max_size=20), st.lists(st.integers(0, 2000), max_size=6))
def test_a_stream_of_frames_round_trips_in_chunks(frames: list[dict[str, Any]], cuts: list[int]) -> None:
    wire = b"".join(encode(**kwargs) for kwargs in frames)
    want: list[Event] = []
    last_id, retry = "", None
    for kwargs in frames:
        want.append(decoded_as(kwargs, last_id, retry))
        last_id, retry = want[-1].id, want[-1].retry
    assert decode(split(wire, cuts)) == (want, last_id, retry)


@settings(max_examples=QUICK_FUZZ_EXAMPLES, deadline=None)
@given(*FUZZ_INPUTS)
def test_fuzz_decoder_raises_only_sse_errors(wire: bytes, cuts: list[int], max_line: int) -> None:
    decoder_raises_only_sse_errors(wire, cuts, max_line)
