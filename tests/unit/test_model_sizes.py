"""The bytes a model may yield (tokenwire.models.MAX_ENTRY_BYTES, MAX_ANSWER_BYTES): an entry past 64 KiB, or
an answer past 16 MiB in all, ends the stream ``failed`` naming the part and the bound, every entry before it
readable; an entry of exactly the bound is taken.  Checked where a model's yields become log entries
(``ModelParts``), so the memory log (``TokenStreams`` through httpx's ASGI transport, and read by
``tokenwire.client``) and the shared log (``SharedModel``'s producer over a stand-in for the Redis log) fail
alike.  Every dialect's frames of an entry at the bound fit tokenwire's decoder's line, whatever its bytes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support.models import yielding

from tokenwire.asgi import TokenStreams
from tokenwire.asgi.shared_model import SharedModel
from tokenwire.client import aevents
from tokenwire.core.effects import Await, Process, Put
from tokenwire.core.endings import EarlyEnd
from tokenwire.core.frames import TokenItem, entry_frame
from tokenwire.core.parts import (
    Data,
    File,
    Part,
    PartError,
    Reasoning,
    Refusal,
    Source,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    decode,
    encode,
)
from tokenwire.core.sources import OnDisconnect
from tokenwire.core.sse import MAX_LINE_BYTES, Decoder
from tokenwire.core.tokenlog import StreamState
from tokenwire.endpoints.openai_chat import ChatChunks
from tokenwire.endpoints.openai_responses import ResponseEvents
from tokenwire.endpoints.openai_wire import Answered
from tokenwire.endpoints.ui_stream import ChatFrames
from tokenwire.models import MAX_ANSWER_BYTES, MAX_ENTRY_BYTES, ModelParts
from tokenwire.models.yields import PART_PIECE, TEXT_PIECE

BOUND = MAX_ENTRY_BYTES
TOO_BIG = ("part {index}: the model yielded an entry of {size} bytes; an entry is at most 131072 (tokenwire's "
           "decoder reads lines of 1 MiB)")
TOO_MUCH = "part {index}: the model yielded more than 16777216 bytes in all, the most one answer keeps"
# Entries of the bound that make the answer's whole bound.
WHOLE = MAX_ANSWER_BYTES // BOUND


def test_the_bounds_are_128_kib_an_entry_and_16_mib_an_answer() -> None:
    assert (MAX_ENTRY_BYTES, MAX_ANSWER_BYTES, WHOLE) == (128 << 10, 16 << 20, 128)


def _entries(items: list[Any], reader: ModelParts | None = None) -> list[str]:
    reader = reader or ModelParts()
    entries: list[str] = []
    for item in items:
        entries += reader.entries(item, len(entries))
    return entries + reader.close(len(entries))


# -- ModelParts: where every model's yields become entries ---------------------------------------------------
@pytest.mark.parametrize("item", [
    "a" * BOUND,                                             # ASCII text: the fast path
    "é" * (BOUND // 2),                                      # two bytes a character
    "😀" * (BOUND // 4),                                     # four
    Data("n", "x" * (BOUND - len(encode(Data("n", ""))))),  # a part: its codec form is the bound
], ids=["ascii", "latin", "emoji", "part"])
def test_an_entry_of_exactly_the_bound_is_taken(item: str | Part) -> None:
    (entry,) = _entries([item])
    assert len(entry.encode()) == BOUND


@pytest.mark.parametrize(("item", "size"), [
    ("\x00" * 25_000, 150_026),                     # a text starting with the mark: its escaped JSON is counted
    (Data("n", "x" * (BOUND + 1 - len(encode(Data("n", ""))))), BOUND + 1),
    (ToolResult("c", "x" * BOUND), len(encode(ToolResult("c", "x" * BOUND)))),
], ids=["escaped", "data", "tool-result"])
def test_a_part_that_cannot_be_cut_past_the_bound_is_a_part_error_naming_it(item: Any, size: int) -> None:
    items = ["Hello", " there", *([ToolCallStart("c", "f"), ToolCallEnd("c", {})] if isinstance(item, ToolResult)
                                  else []), item]
    with pytest.raises(PartError) as raised:
        _entries(items)
    assert str(raised.value) == TOO_BIG.format(index=len(items) - 1, size=size)


CHUNK = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "a" * (3 * BOUND)}}]}


@pytest.mark.parametrize(("item", "pieces", "text"), [
    ("a" * (BOUND + 1), 5, "a" * (BOUND + 1)),                             # ASCII: TEXT_PIECE characters a piece
    ("a" + "é" * (BOUND // 2), 3, "a" + "é" * (BOUND // 2)),
    ("😀" * BOUND, 4, "😀" * BOUND),
    (Reasoning("x" * BOUND), BOUND // PART_PIECE, "x" * BOUND),           # a part's text: PART_PIECE a piece
    (Refusal("no" * BOUND), 2 * BOUND // PART_PIECE, "no" * BOUND),
    (CHUNK, 12, "a" * (3 * BOUND)),                                         # a client's object: its text alike
], ids=["ascii", "latin", "emoji", "reasoning", "refusal", "chunk"])
def test_a_delta_past_the_bound_is_logged_in_pieces_that_fit(item: Any, pieces: int, text: str) -> None:
    """An upstream that sends a whole answer in one chunk: its text is cut into entries that each fit, and read
    together they are the text it sent."""
    entries = _entries(["Hello", item])
    assert entries[0] == "Hello" and len(entries) == 1 + pieces
    assert all(len(entry.encode()) <= BOUND for entry in entries)
    decoded = [decode(entry) for entry in entries[1:]]
    assert "".join(piece if isinstance(piece, str) else piece.text for piece in decoded) == text   # type: ignore[union-attr]


def test_a_calls_arguments_in_one_piece_past_the_bound_are_logged_in_pieces() -> None:
    arguments = json.dumps({"text": "y" * 200_000})
    entries = _entries([ToolCallStart("c", "f"), ToolCallDelta("c", arguments)])
    deltas = [part for part in map(decode, entries) if isinstance(part, ToolCallDelta)]
    assert len(deltas) == -(-len(arguments) // PART_PIECE) and "".join(d.arguments for d in deltas) == arguments


def test_a_hundred_megabytes_of_text_in_one_token_passes_the_answers_bound() -> None:
    with pytest.raises(PartError) as raised:
        _entries(["Hello", " there", 104_857_600 * "a"])
    assert str(raised.value) == TOO_MUCH.format(index=2)    # the token that passed it, not its 512th piece


def test_an_answer_past_its_bound_is_a_part_error_naming_the_part_that_passed_it() -> None:
    reader = ModelParts()
    entries = _entries(["a" * BOUND] * WHOLE, reader)     # exactly the bound in all: taken
    assert len(entries) == WHOLE and reader.size == MAX_ANSWER_BYTES
    with pytest.raises(PartError) as raised:
        reader.entries("x", WHOLE)
    assert str(raised.value) == TOO_MUCH.format(index=WHOLE)


def test_a_continuation_counts_its_prefix_towards_the_answers_bound() -> None:
    reader = ModelParts(["b" * BOUND] * (WHOLE - 1) + [ToolCallStart("c", "f"), ToolCallEnd("c", {})])
    assert reader.size == (WHOLE - 1) * BOUND + len(encode(ToolCallStart("c", "f"))) + len(encode(ToolCallEnd("c", {})))
    with pytest.raises(PartError, match=rf"^part {WHOLE + 1}: the model yielded more than 16777216 bytes in all"):
        reader.entries("a" * BOUND, WHOLE + 1)


# -- the memory log: TokenStreams, read through httpx's ASGI transport -------------------------------------------
async def _read(items: list[Any]) -> tuple[list[str], str, Any]:
    """The tokens of ``GET /stream`` on a model yielding ``items``, its last event's name and data."""
    streams = TokenStreams(yielding(items))
    async with streams.lifespan(), httpx.AsyncClient(transport=httpx.ASGITransport(app=streams),
                                                     base_url="http://t") as client:
        read = await client.get("/stream")
    events = Decoder().feed(read.content)
    return [e.data for e in events if e.event == "token"], events[-1].event, json.loads(events[-1].data)


def test_a_model_yielding_a_part_past_the_bound_fails_naming_it_the_entries_before_it_readable() -> None:
    big = Data("n", "x" * (BOUND + 1 - len(encode(Data("n", "")))))
    tokens, last, data = asyncio.run(_read(["Hello", " there", big, " never"]))
    assert tokens == ["Hello", " there"]
    assert (last, data) == ("failed", {"error": TOO_BIG.format(index=2, size=BOUND + 1), "tokens": 2})


def test_a_model_yielding_an_entry_of_exactly_the_bound_is_done() -> None:
    tokens, last, data = asyncio.run(_read(["Hello", "a" * BOUND]))
    assert (tokens, last, data["tokens"]) == (["Hello", "a" * BOUND], "done", 2)


def test_a_model_whose_answer_passes_its_bound_fails_naming_the_part() -> None:
    tokens, last, data = asyncio.run(_read(["a" * BOUND] * WHOLE + ["x", "y"]))
    assert len(tokens) == WHOLE
    assert (last, data) == ("failed", {"error": TOO_MUCH.format(index=WHOLE), "tokens": WHOLE})


def test_tokenwires_client_reads_a_1_mib_token_whole_in_frames_it_can_read() -> None:
    """Before, one 1 MiB token was one 1 MiB line, which tokenwire's own client refuses (its decoder's bound)."""
    async def read() -> list[tuple[str, str]]:
        streams = TokenStreams(yielding(["Hello", "a" * MAX_LINE_BYTES]))
        async with streams.lifespan(), httpx.AsyncClient(transport=httpx.ASGITransport(app=streams)) as client:
            return [(event.event, event.data) async for event in aevents("http://t/stream", client=client,
                                                                         max_attempts=1)]
    got = asyncio.run(read())
    names = [name for name, _ in got]
    assert names == ["open", *["token"] * (1 + MAX_LINE_BYTES // TEXT_PIECE), "done"]
    assert "".join(data for name, data in got if name == "token") == "Hello" + "a" * MAX_LINE_BYTES


# -- the shared log: SharedModel's producer, its log calls awaited on a stand-in for Redis -----------------------
class _Claim:
    stopped = False


class _Log:
    """What the owner's producer asks of the Redis log (``AsyncRedisLog``): appends and the ending, kept here."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.ending: tuple[StreamState, str | None] | None = None

    async def claim(self, stream_id: str) -> _Claim:
        return _Claim()

    def watch_stop(self, stream_id: str, stopped: Callable[[], None]) -> None:
        pass

    def disown(self, stream_id: str) -> None:
        pass

    def append_future(self, stream_id: str, index: int, token: str) -> asyncio.Future[None]:
        assert index == len(self.entries)
        self.entries.append(token)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def set_state(self, stream_id: str, state: StreamState, failure: str | None = None) -> None:
        self.ending = (state, failure)


class _Stream:
    """What a source reads and changes of its stream (``Fed``), as much as an owner's producer uses."""

    stream_id, cancelled, ending, on_disconnect = "s1", False, None, OnDisconnect.DETACH

    def __init__(self) -> None:
        self.passed: list[str] = []
        self.end: tuple[int, EarlyEnd | None] | None = None

    def pass_on(self, item: TokenItem) -> Put:
        return Put(self, item)                     # type: ignore[arg-type]

    def ended(self, total: int, ending: EarlyEnd | None = None) -> None:
        self.end = (total, ending)


async def _drive(process: Process, stream: _Stream) -> None:
    """Perform the producer's effects as the real-time driver does: await an ``Await``, take a ``Put``."""
    sent: Any = None
    while True:
        try:
            effect = process.send(sent)
        except StopIteration:
            return
        sent = None
        if isinstance(effect, Await):
            sent = await effect.awaitable
        else:
            assert isinstance(effect, Put), effect
            stream.passed.append(effect.item.text)


def _shared(items: list[Any]) -> tuple[_Log, _Stream]:
    log, stream = _Log(), _Stream()
    source = SharedModel(yielding(items)(None), log)     # type: ignore[arg-type, arg-type]
    asyncio.run(_drive(source.produce(stream, 0), stream))     # type: ignore[arg-type]
    return log, stream


def test_on_a_shared_log_a_part_past_the_bound_fails_the_stream_for_every_process_naming_it() -> None:
    big = Data("n", "x" * (BOUND + 1 - len(encode(Data("n", "")))))
    log, stream = _shared(["Hello", " there", big, " never"])
    message = TOO_BIG.format(index=2, size=BOUND + 1)
    assert log.entries == stream.passed == ["Hello", " there"]
    assert log.ending == (StreamState.CANCELLED, message)           # what a follower's readers are told
    assert stream.end == (2, EarlyEnd("failed", message))


def test_on_a_shared_log_an_answer_past_its_bound_fails_and_one_of_exactly_the_bound_is_done() -> None:
    log, stream = _shared(["a" * BOUND] * WHOLE + ["x"])
    assert len(log.entries) == WHOLE and log.ending == (StreamState.CANCELLED, TOO_MUCH.format(index=WHOLE))
    log, stream = _shared(["a" * BOUND] * WHOLE)
    assert len(log.entries) == WHOLE and log.ending == (StreamState.DONE, None) and stream.end == (WHOLE, None)


# -- every dialect's frames of an entry at the bound fit the decoder's line --------------------------------------
# What json.dumps writes longest for its bytes: a control byte and DEL (six characters), UTF-8 of two, three and
# four bytes (\\uXXXX, a surrogate pair), what JSON in a JSON string escapes twice (a quote, a backslash).
# Text as it comes, with the characters JSON escapes in two bytes; control characters (six) are left out: an entry
# of them can pass the line in a JSON dialect (see MAX_ENTRY_BYTES).
HOSTILE = ["é", "\u2028", "😀", '"', "\\", "a"]


def _at_bound(make: Callable[[str], list[Any]], char: str) -> list[Any]:
    """``make``'s parts, the last one's text ``char`` repeated as often as its entry stays within the bound."""
    empty, one = (len(encode(make(text)[-1]).encode()) for text in ("", char))
    parts = make(char * ((BOUND - empty) // (one - empty)))
    assert BOUND - (one - empty) < len(encode(parts[-1]).encode()) <= BOUND
    return parts


KINDS: dict[str, Callable[[str], list[Any]]] = {
    "text": lambda s: ["x" + s],
    "reasoning": lambda s: [Reasoning(s)],
    "refusal": lambda s: [Refusal(s)],
    "tool-call-start": lambda s: [ToolCallStart("c", "f" + s)],
    "tool-call-delta": lambda s: [ToolCallStart("c", "f"), ToolCallDelta("c", s)],
    "tool-call-end": lambda s: [ToolCallStart("c", "f"), ToolCallEnd("c", {"k": s})],
    "tool-result": lambda s: [ToolCallStart("c", "f"), ToolCallEnd("c", {}), ToolResult("c", s)],
    "source": lambda s: [Source("s", url="https://x/" + s)],
    "file": lambda s: [File("data:," + s, "text/plain")],
    "data": lambda s: [Data("n", [s])],
}


class _Rendered:
    stream_id, policy, capacity, retry_ms, ending = "s1", None, 4, 750, None

    def __init__(self, total: int) -> None:
        self.total = total

    def closing_frame(self, delivered_from: int, dropped: int) -> bytes:
        return b""


def _wire(dialect: str, entries: list[str]) -> bytes:
    if dialect == "tokenwire":
        return b"".join(entry_frame(TokenItem(i, entry)) for i, entry in enumerate(entries))
    renderings: dict[str, Callable[[], Any]] = {
        "chat": lambda: ChatChunks(Answered("chatcmpl-1", "m", 0), True),
        "responses": lambda: ResponseEvents(Answered("resp_1", "m", 0), False), "ui": lambda: ChatFrames(0)}
    rendering = renderings[dialect]()
    stream = _Rendered(len(entries))
    tokens = b"".join(rendering.token(TokenItem(i, entry)) for i, entry in enumerate(entries))
    return bytes(rendering.opening(stream, -1) + tokens + rendering.closing(stream, 0, 0))


# The longest line each dialect makes of an entry at the bound, in entries: tokenwire's frames carry it as it is,
# the JSON dialects escape it (OpenAI's chat chunks twice over for reasoning).
GROWTH = {"tokenwire": 1, "chat": 5, "responses": 3, "ui": 2}


@pytest.mark.parametrize("dialect", list(GROWTH))
def test_every_dialects_frames_of_an_entry_at_the_bound_fit_tokenwires_decoder(dialect: str) -> None:
    longest = 0
    for kind, make in KINDS.items():
        for char in HOSTILE:
            wire = _wire(dialect, _entries(_at_bound(make, char)))
            Decoder().feed(wire)                  # raises LineTooLong past MAX_LINE_BYTES
            longest = max(longest, *(len(line.decode()) for line in wire.split(b"\n")))
            assert longest <= MAX_LINE_BYTES, (kind, char)
    assert longest > GROWTH[dialect] * BOUND     # the worst was tried: a hostile entry's frame is that much longer
