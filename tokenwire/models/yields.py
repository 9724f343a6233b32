"""What a model may yield, made log entries: ``str``, tokenwire's parts, and the objects of the clients people use.

How this works: ``ModelParts.entries`` takes what the model yielded next
and returns the log entries it makes (``parts.encode``), each part checked
where it stands (``parts.PartChecker``):

- a ``str`` is text, as a token always was: the fast path, one UTF-8 check
  and no other cost;
- one of ``tokenwire.core.parts``' classes is itself;
- an object of a client is read by that client's adapter, chosen by the
  object's module name, so none of those packages is imported here: the
  openai SDK's ``ChatCompletionChunk`` (``openai_chat.ChunkParts``) and
  Responses stream events (``openai_responses.ResponseParts``), anthropic's
  raw message stream events (``anthropic_events.AnthropicParts``), and
  LangChain's ``AIMessageChunk`` and ``ToolMessage``
  (``langchain_chunks.LangChainParts``).  A dict that says it is a chat
  completion chunk (``"object": "chat.completion.chunk"``) or a Responses
  event (``"type": "response...."``) is read as one too.

An adapter is a small stateful converter (a tool call's id by its index,
say), one per client per answer.  A finish or usage an adapter reads is held
until the answer ends: a model that runs a tool itself (an agent loop in the
factory) yields its first call's chunks, finish_reason ``tool_calls``
included, then the ``ToolResult`` and a ``Step``, then the next call's
chunks; what ends the answer is the last call's finish, and its usage is the
calls' usage summed.  A ``Step`` the model yields starts fresh adapters (the
next call's chunks number their tool calls from 0 again).

Anything else, or a part that may not stand where it does, is a
``PartError`` naming the part and its index: the stream ends ``failed``
with that message, every part before it kept.  So is an entry of more than
``MAX_ENTRY_BYTES``, or one that takes the answer past ``MAX_ANSWER_BYTES``
in all; a delta longer than an entry (text, reasoning, a refusal, a call's
arguments) is logged in pieces that fit, so only a part that cannot be cut
(a tool's result, a data part, a file) is refused for its size.  An entry's
size in UTF-8 is counted where it is already known (a ``str`` that is ASCII
is its length; any other is encoded once already, for the UTF-8 check), so
text pays one addition and two comparisons.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from ..core.parts import (
    PART_MARK,
    Finish,
    Part,
    PartChecker,
    PartError,
    Reasoning,
    Refusal,
    Step,
    ToolCallDelta,
    Usage,
    encode,
    is_part,
)
from ..core.sse import MAX_LINE_BYTES
from .anthropic_events import AnthropicParts
from .langchain_chunks import LangChainParts
from .openai_chat import ChunkParts
from .openai_responses import ResponseParts

__all__ = ["MAX_ANSWER_BYTES", "MAX_ENTRY_BYTES", "ModelParts", "token_problem"]

# A bad yield is quoted in the error up to this many characters.
_QUOTE_CHARS = 80
# The most UTF-8 bytes one log entry (a token, or a part in the log's codec) may have: 128 KiB, an eighth of the
# line tokenwire's decoder reads (MAX_LINE_BYTES, 1 MiB).  A token is a few bytes and a tool call's argument delta
# tens; a tool's result, a data part or a file may be large, and 128 KiB takes a fetched page's text.  A dialect's
# frame may be four times its entry for text as it comes (JSON escapes a quote or a backslash in two bytes, and
# OpenAI's chat chunks carry reasoning twice, as ``reasoning`` and ``reasoning_content``), which still fits the
# decoder's line; an entry made of control characters, which JSON writes in six bytes each, can pass it in the JSON
# dialects, and tokenwire's client then says so (``ProtocolError`` naming the bound) where others read on.
MAX_ENTRY_BYTES = MAX_LINE_BYTES // 8
# A delta longer than an entry (an upstream that sends a whole answer, or a call's whole arguments, in one chunk)
# is logged in pieces of these many characters: text takes at most 4 bytes of UTF-8 a character; a part's text is
# JSON in its entry, where one character may take 12 (an escaped surrogate pair), with room left for its fields.
TEXT_PIECE = MAX_ENTRY_BYTES // 4
PART_PIECE = MAX_ENTRY_BYTES // 16
# The most UTF-8 bytes one answer's entries may have in all: 16 MiB.  An LLM's answer of 32k tokens (the most
# today's models give) is well under 1 MiB of text; tool results and data parts make more, and this still holds
# 128 entries of MAX_ENTRY_BYTES.  Without it only the count bounded a stream: MAX_MODEL_TOKENS entries of
# MAX_ENTRY_BYTES are 6.5 GB, held in memory (or in Redis) for the stream's lifetime.
MAX_ANSWER_BYTES = 16 << 20


class Adapter(Protocol):
    """One client's stream objects in, parts out: ``feed`` one object, ``close`` at the answer's end."""

    def feed(self, item: Any) -> list[str | Part]: ...
    def close(self) -> Sequence[str | Part]: ...


# Which adapter reads an object, by the start of its class's module name (the packages are never imported here).
_BY_MODULE: tuple[tuple[str, type[Adapter]], ...] = (
    ("openai.types.chat.", ChunkParts), ("openai.types.responses.", ResponseParts),
    ("anthropic.", AnthropicParts), ("langchain_core.messages.", LangChainParts))


def token_problem(token: str, index: int) -> str | None:
    """What is wrong with the text ``token``, the model's part ``index``; None if nothing.

    Text must encode to UTF-8 (the wire's encoding; a lone surrogate such as
    ``"\\ud800"`` has no encoding).
    """
    try:
        _utf8_size(token, index)
    except PartError as exc:
        return str(exc)
    return None


def _utf8_size(token: str, index: int) -> int:
    """The bytes of the text ``token`` in UTF-8; ``PartError`` if it has none (see ``token_problem``)."""
    if token.isascii():
        return len(token)
    try:
        return len(token.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise PartError(f"the model yielded a str that is not valid UTF-8 (a lone surrogate at position "
                        f"{exc.start}) as token {index}") from None


def _quote(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "..."


def _adapter_of(item: object) -> type[Adapter] | None:
    if isinstance(item, Mapping):
        if item.get("object") == "chat.completion.chunk":
            return ChunkParts
        kind = item.get("type")
        return ResponseParts if isinstance(kind, str) and kind.startswith("response.") else None
    module = type(item).__module__ + "."
    for prefix, adapter in _BY_MODULE:
        if module.startswith(prefix):
            return adapter
    return None


class ModelParts:
    """One model's yields made log entries, each part checked where it stands; see the module.

    ``prefix``: the parts a continuation starts after (they were checked as
    they were logged; the checker learns its calls from them, and they count
    towards ``MAX_ANSWER_BYTES``).  ``size``: the UTF-8 bytes of the entries
    made so far.
    """

    __slots__ = ("_adapters", "_checker", "_finish", "_usage", "finished", "size")

    def __init__(self, prefix: Iterable[str | Part] = ()) -> None:
        self._checker = PartChecker()
        self._adapters: dict[type[Adapter], Adapter] = {}
        self._finish: Finish | None = None        # an adapter's finish, held until the answer ends
        self._usage: Usage | None = None          # the adapters' usage summed, held likewise
        self.finished = False                     # a Finish was logged: only usage may follow
        self.size = 0
        for index, part in enumerate(prefix):
            try:
                self.size += _entry(index, part)[1]
                self._check(index, part)
            except PartError:
                pass                              # logged already: the continuation goes on from it

    def entries(self, item: object, index: int) -> list[str]:
        """The log entries ``item`` makes, the first at ``index``; ``PartError`` naming what is wrong."""
        if item.__class__ is str and item.isascii() and item[:1] != PART_MARK and not self.finished:
            size = len(item)                      # the fast path: text, as a token always was (ASCII: a byte a char)
            if size > MAX_ENTRY_BYTES:
                return self._logged(index, [item])              # in pieces
            if self.size + size > MAX_ANSWER_BYTES:
                self._count(index, size)          # past the answer's bound: raises, naming it
            self.size += size
            return [item]
        if isinstance(item, str) or is_part(item):
            if isinstance(item, Step):
                self._adapters.clear()            # the next model call's objects are read afresh
            return self._logged(index, [item])                      # type: ignore[list-item]
        adapter = _adapter_of(item)
        if adapter is None:
            raise PartError(f"part {index}: the model yielded {_quote(item)} ({type(item).__name__}); a model "
                            f"yields a str, a part of tokenwire.core.parts, or a stream object of the openai, "
                            f"anthropic or LangChain clients")
        reader = self._adapters.get(adapter)
        if reader is None:
            reader = self._adapters[adapter] = adapter()
        try:
            parts = reader.feed(item)
        except PartError as exc:
            raise PartError(f"part {index}: {exc}") from None
        return self._logged(index, parts, held=True)

    def close(self, index: int) -> list[str]:
        """The entries the answer's end completes, the first at ``index``: the adapters' last, the held finish."""
        parts: list[str | Part] = []
        try:
            for reader in self._adapters.values():
                parts.extend(reader.close())
        except PartError as exc:
            raise PartError(f"part {index}: {exc}") from None
        entries = self._logged(index, parts, held=True)
        held = [part for part in (self._finish, self._usage) if part is not None]
        self._finish = self._usage = None
        return entries + self._logged(index + len(entries), held)

    def _logged(self, index: int, parts: Sequence[str | Part], *, held: bool = False) -> list[str]:
        entries: list[str] = []
        for yielded in parts:
            if held and isinstance(yielded, Finish):
                self._finish = yielded
                continue
            if held and isinstance(yielded, Usage):
                self._usage = yielded if self._usage is None else _summed(self._usage, yielded)
                continue
            first = index + len(entries)          # a bound passed inside a delta's pieces names the delta
            for part in _pieces(yielded):
                self._check(index + len(entries), part)
                entry, size = _entry(index + len(entries), part)
                self._count(first, size)
                entries.append(entry)
        return entries

    def _count(self, index: int, size: int) -> None:
        """Add the entry ``index`` of ``size`` bytes to the answer's; ``PartError`` past either bound."""
        if size > MAX_ENTRY_BYTES:
            raise PartError(f"part {index}: the model yielded an entry of {size} bytes; an entry is at most "
                            f"{MAX_ENTRY_BYTES} (tokenwire's decoder reads lines of {MAX_LINE_BYTES >> 20} MiB)")
        self.size += size
        if self.size > MAX_ANSWER_BYTES:
            raise PartError(f"part {index}: the model yielded more than {MAX_ANSWER_BYTES} bytes in all, the most "
                            f"one answer keeps")

    def _check(self, index: int, part: str | Part) -> None:
        if not isinstance(part, Finish | Usage):
            self._finish = None                   # the model goes on: a finish held was its step's, not the answer's
        self._checker.check(index, part)
        if isinstance(part, Finish):
            self.finished = True


def _pieces(part: str | Part) -> Sequence[str | Part]:
    """``part``, or if it is a delta too long for one entry (text, reasoning, a refusal, a call's arguments), its
    pieces that fit one (``TEXT_PIECE``, ``PART_PIECE``): read together they are the same text."""
    if isinstance(part, str):
        if len(part) <= TEXT_PIECE or _fits(part):
            return (part,)
        return [part[at:at + TEXT_PIECE] for at in range(0, len(part), TEXT_PIECE)]
    if isinstance(part, Reasoning | Refusal) and len(part.text) > PART_PIECE and not _fits(encode(part)):
        return [type(part)(part.text[at:at + PART_PIECE]) for at in range(0, len(part.text), PART_PIECE)]
    if isinstance(part, ToolCallDelta) and len(part.arguments) > PART_PIECE and not _fits(encode(part)):
        return [ToolCallDelta(part.call_id, part.arguments[at:at + PART_PIECE])
                for at in range(0, len(part.arguments), PART_PIECE)]
    return (part,)

def _fits(text: str) -> bool:
    """Whether ``text`` (a long one) is one entry's UTF-8 at most (a lone surrogate is refused later, by name)."""
    return len(text) <= MAX_ENTRY_BYTES and len(text.encode("utf-8", "surrogatepass")) <= MAX_ENTRY_BYTES


def _entry(index: int, part: str | Part) -> tuple[str, int]:
    """``part``'s log entry and its UTF-8 bytes; ``PartError`` if its text cannot be sent (a lone surrogate)."""
    if isinstance(part, str):
        size = _utf8_size(part, index)
        entry = encode(str(part))             # a str subclass is logged as the plain str it holds
        return entry, size if entry[:1] != PART_MARK else len(entry)     # escaped: JSON, all ASCII
    entry = encode(part)
    if entry.isascii():
        return entry, len(entry)
    try:
        return entry, len(entry.encode("utf-8"))
    except UnicodeEncodeError:
        raise PartError(f"part {index} ({_quote(part)}): its text is not valid UTF-8 (a lone surrogate)") from None


def _summed(one: Usage, other: Usage) -> Usage:
    return Usage(one.input_tokens + other.input_tokens, one.output_tokens + other.output_tokens,
                 one.reasoning_tokens + other.reasoning_tokens, one.cached_input_tokens + other.cached_input_tokens)

