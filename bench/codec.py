"""Items 1 and 2: the SSE decoder and encoder against the Python SSE libraries.

How this works: one stream is built from tokenwire's own frames (``open``,
a token frame per token of the answer repeated, ``done``) and cut into
4 KiB chunks; every decoder gets exactly those chunks and must produce
exactly the same (type, data, last event id) for every frame, or the row
says so.  The peers are driven the way their libraries drive themselves:

- httpx-sse: httpx's incremental UTF-8 text decoder (``errors="replace"``,
  as ``Response.iter_text`` uses), then ``SSELineDecoder`` and
  ``SSEDecoder``, then the line decoder's ``flush`` at the end, as
  ``EventSource.iter_sse`` does;
- sseclient-py: ``SSEClient(chunks).events()``.

Conformance runs every vector of the project's table
(``tests/support/sse_vectors.py``) through each decoder, whole and one byte at a
time, and compares what the WHATWG spec defines a page sees: each
dispatched event's type, data and lastEventId, and the reconnection time.
The encoder row times ``encode`` for a token frame against sse-starlette's
``ServerSentEvent(...).encode()`` and a bare f-string that checks nothing.
"""

from __future__ import annotations

import codecs
import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import Any

from tokenwire.core.effects import TokenItem
from tokenwire.core.frames import done_frame, open_frame, token_frame
from tokenwire.core.model import ANSWER
from tokenwire.core.sse import Decoder, encode

from .common import ROOT, Row, best_time

__all__ = ["run"]

CHUNK = 4096
# (type, data, lastEventId) of each dispatched event, and the final
# reconnection time (None: never set, or the decoder does not expose it).
Seen = tuple[list[tuple[str, str, str]], int | None]
DecodeFn = Callable[[Sequence[bytes]], Seen]


def token_stream(tokens: int) -> tuple[bytes, list[tuple[str, str, str]]]:
    """Return the bytes of one stream of ``tokens`` token frames and its events."""
    texts = [ANSWER[i % len(ANSWER)] for i in range(tokens)]
    frames = [open_frame("bench", resumed=False, start_index=0, policy="block", buffer=64)]
    frames += [token_frame(TokenItem(i, t)) for i, t in enumerate(texts)]
    frames.append(done_frame(tokens, delivered_from=0, dropped=0))
    expected = [("open", Decoder().feed(frames[0])[0].data, "")]
    expected += [("token", t, str(i)) for i, t in enumerate(texts)]
    expected.append(("done", Decoder().feed(frames[-1])[0].data, str(tokens - 1)))
    return b"".join(frames), expected


def chunked(data: bytes, size: int = CHUNK) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


# ------------------------------------------------------------- decoders
# Each peer has a "native" function (what is timed: bytes in, the library's
# own event objects out, as a caller would hold them) and a conversion to
# what the spec defines, used only to check the result.

Native = tuple[list[Any], Any]


def native_tokenwire(chunks: Sequence[bytes]) -> Native:
    decoder = Decoder()
    events: list[Any] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events, decoder


def seen_tokenwire(native: Native) -> Seen:
    events, decoder = native
    return [(e.event, e.data, e.id) for e in events], decoder.retry


def _httpx_text_decoder() -> Any:
    try:  # the very decoder Response.iter_text uses
        from httpx._decoders import TextDecoder
        return TextDecoder("utf-8")
    except ImportError:  # pragma: no cover - an httpx without it
        return codecs.getincrementaldecoder("utf-8")(errors="replace")


def native_httpx_sse(chunks: Sequence[bytes]) -> Native:
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder
    text, lines, sse = _httpx_text_decoder(), SSELineDecoder(), SSEDecoder()
    out: list[Any] = []
    for chunk in chunks:
        for line in lines.decode(text.decode(chunk)):
            ev = sse.decode(line)
            if ev is not None:
                out.append(ev)
    for line in lines.flush():
        ev = sse.decode(line)
        if ev is not None:
            out.append(ev)
    return out, None


def seen_httpx_sse(native: Native) -> Seen:
    out = native[0]
    retries = [e.retry for e in out if e.retry is not None]
    return [(e.event, e.data, e.id) for e in out], (retries[-1] if retries else None)


def native_sseclient(chunks: Sequence[bytes]) -> Native:
    import sseclient
    return list(sseclient.SSEClient(iter(chunks)).events()), None   # close() is never called


def seen_sseclient(native: Native) -> Seen:
    out = native[0]
    # sseclient-py hands ``retry`` over as the raw string; a caller would int() it.
    retries = [int(e.retry) for e in out if e.retry is not None and e.retry.strip().isdigit()]
    return [(e.event, e.data, e.id or "") for e in out], (retries[-1] if retries else None)


def decode_tokenwire(chunks: Sequence[bytes]) -> Seen:
    return seen_tokenwire(native_tokenwire(chunks))


def decode_httpx_sse(chunks: Sequence[bytes]) -> Seen:
    return seen_httpx_sse(native_httpx_sse(chunks))


def decode_sseclient(chunks: Sequence[bytes]) -> Seen:
    return seen_sseclient(native_sseclient(chunks))


def _decoders() -> list[tuple[str, Callable[[Sequence[bytes]], Native], DecodeFn]]:
    found: list[tuple[str, Callable[[Sequence[bytes]], Native], DecodeFn]] = [
        ("tokenwire", native_tokenwire, decode_tokenwire)]
    for name, module, native, fn in (("httpx-sse", "httpx_sse", native_httpx_sse, decode_httpx_sse),
                                     ("sseclient-py", "sseclient", native_sseclient, decode_sseclient)):
        if importlib.util.find_spec(module) is not None:
            found.append((name, native, fn))
    return found


# ------------------------------------------------------------ conformance

def load_vectors() -> list[Any] | None:
    """Return the project's SSE vector table, or None if it is not there."""
    path = os.path.join(ROOT, "tests", "support", "sse_vectors.py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("_tokenwire_sse_vectors", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.VECTORS)


def conformance(fn: DecodeFn, vectors: Sequence[Any]) -> list[str]:
    """Return the names of the vectors ``fn`` decodes differently from the spec."""
    wrong = []
    for name, _kwargs, wire, events, _last_id, retry in vectors:
        want = ([(e[0], e[1], e[2]) for e in events], retry)
        for chunks in ([wire], [wire[i:i + 1] for i in range(len(wire))]):
            try:
                got = fn(chunks)
            except Exception as exc:  # a peer that raises on a valid stream disagrees too
                got = ([("raised", type(exc).__name__, "")], None)
            if got != want:
                wrong.append(name)
                break
    return wrong


# ----------------------------------------------------------------- rows

def decoder_rows(quick: bool) -> list[Row]:
    tokens, repeats = (30_000, 3) if quick else (300_000, 5)
    data, expected = token_stream(tokens)
    chunks = chunked(data)
    vectors = load_vectors()
    figures: dict[str, tuple[float, float]] = {}
    notes: list[str] = [f"one stream of {tokens:,} token frames (+ open, done), {len(data) / 1e6:.1f} MB, "
                        f"fed in {len(chunks):,} chunks of {CHUNK} bytes; best of {repeats}; timed: bytes in, each "
                        "library's own event objects out"]
    for name, native, fn in _decoders():
        got = fn(chunks)[0]
        exact = got == expected
        seconds = best_time(lambda native=native: native(chunks), repeats)  # type: ignore[misc]
        figures[name] = (len(data) / seconds / 1e6, len(expected) / seconds)
        spec = "no vector table" if vectors is None else _spec_note(fn, vectors)
        notes.append(f"{name}: bench stream {'decoded exactly' if exact else 'DECODED WRONG'}; "
                     f"spec vectors: {spec}")
    ours_mb, ours_fps = figures["tokenwire"]
    rows = []
    for peer in ("httpx-sse", "sseclient-py"):
        if peer not in figures:
            notes.append(f"{peer} is not installed: pip install -e '.[bench]'")
            continue
        mb, fps = figures[peer]
        goal = peer == "httpx-sse"
        rows.append(Row(1, f"decoder vs {peer}, MB/s | frames/s", f"{ours_mb:.1f} | {ours_fps / 1e6:.2f}M",
                        f"{mb:.1f} | {fps / 1e6:.2f}M", ours_fps / fps,
                        ">= 3x" if goal else "", (ours_fps / fps >= 3) if goal else None))
    if not rows:
        rows.append(Row(1, "decoder, MB/s | frames/s", f"{ours_mb:.1f} | {ours_fps / 1e6:.2f}M"))
    return [Row(r.item, r.name, r.ours, r.peer, r.ratio, r.goal, r.met, tuple(notes)) for r in rows]


def _spec_note(fn: DecodeFn, vectors: Sequence[Any]) -> str:
    wrong = conformance(fn, vectors)
    if not wrong:
        return f"all {len(vectors)} agree with the spec"
    return f"{len(vectors) - len(wrong)}/{len(vectors)} agree; differs on: " + "; ".join(wrong)


def encoder_rows(quick: bool) -> list[Row]:
    frames, repeats = (50_000, 3) if quick else (500_000, 5)
    texts = [ANSWER[i % len(ANSWER)] for i in range(frames)]
    ids = [str(i) for i in range(frames)]
    pairs = list(zip(texts, ids, strict=True))

    def ours() -> None:
        for t, i in pairs:
            encode(t, event="token", id=i)

    def bare() -> None:
        for t, i in pairs:
            f"id: {i}\nevent: token\ndata: {t}\n\n".encode()

    def unchecked(data: str, *, event: str | None = None, id: str | None = None,  # noqa: A002
                  retry: int | None = None) -> bytes:
        return f"id: {id}\nevent: {event}\ndata: {data}\n\n".encode()

    def call_only() -> None:
        for t, i in pairs:
            unchecked(t, event="token", id=i)

    rate = {"tokenwire": frames / best_time(ours, repeats), "f-string": frames / best_time(bare, repeats),
            "call": frames / best_time(call_only, repeats)}
    assert encode(texts[1], event="token", id="1") == f"id: 1\nevent: token\ndata: {texts[1]}\n\n".encode()
    per_frame = {k: 1e9 / v for k, v in rate.items()}
    notes = (f"{frames:,} token frames (event, id, data) per pass, best of {repeats}; "
             "the bare f-string checks nothing (no CR/LF split, no type or NUL checks)",
             f"per frame: bare f-string {per_frame['f-string']:.0f} ns; a function with encode's signature that "
             f"only formats {per_frame['call']:.0f} ns ({rate['call'] / rate['f-string']:.2f}x the f-string's rate: "
             f"the call alone); encode {per_frame['tokenwire']:.0f} ns, so its checks cost "
             f"{per_frame['tokenwire'] - per_frame['call']:.0f} ns",)
    rows = []
    if importlib.util.find_spec("sse_starlette") is not None:
        from sse_starlette import ServerSentEvent

        def peer() -> None:
            for t, i in pairs:
                ServerSentEvent(t, event="token", id=i).encode()

        rate["sse-starlette"] = frames / best_time(peer, repeats)
        rows.append(Row(2, "encoder vs sse-starlette, frames/s", f"{rate['tokenwire'] / 1e6:.2f}M",
                        f"{rate['sse-starlette'] / 1e6:.2f}M", rate["tokenwire"] / rate["sse-starlette"],
                        ">= 4x", rate["tokenwire"] / rate["sse-starlette"] >= 4, notes))
    share = rate["tokenwire"] / rate["f-string"]
    rows.append(Row(2, "encoder vs bare f-string, frames/s", f"{rate['tokenwire'] / 1e6:.2f}M",
                    f"{rate['f-string'] / 1e6:.2f}M", share, ">= 0.5x", share >= 0.5, notes))
    return rows


def run(quick: bool) -> list[Row]:
    return decoder_rows(quick) + encoder_rows(quick)
