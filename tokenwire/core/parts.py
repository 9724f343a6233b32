"""The parts of an answer: text, reasoning, tool calls and their results, sources, files, data, steps, usage, finish.

How this works: a stream is indexed entries in a log plus an ending, and an
entry is one part.  Text is the fast path and stays what a token always was:
a plain ``str``, stored, replayed and rendered as it is.  Every other part is
one of the small immutable classes below (in the manner of h11's events), and
goes into the log as one string too: ``PART_MARK`` (a NUL) followed by the
part's JSON (``encode``).  So the memory log and Redis store, trim, replay and
count a typed part exactly as they do a token, and ``decode`` (the one codec,
here) turns an entry back into a ``str`` or a part.  A text whose first
character is itself a NUL is stored as a JSON text part, so no text can pass
for a part.

A tool call is three kinds of part: ``ToolCallStart`` (its id and the tool's
name), any number of ``ToolCallDelta`` (the arguments' text, in pieces, as
models stream them) and ``ToolCallEnd`` (the parsed input).  Each is an entry
of its own, so a resume can start between any two of them, in the middle of
the arguments too.  ``Step`` starts a new step (after a tool's result, the
model answers again); ``Usage`` and ``Finish`` say what the answer cost and
why it ended.  What is legal after what is ``PartChecker``'s: a model or an
upstream that sends an argument delta for a call it never started ends its
stream ``failed``, naming the part and its index.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

__all__ = ["FINISH_REASONS", "PART_MARK", "Data", "File", "Finish", "Part", "PartChecker", "PartError", "Reasoning",
           "Refusal", "Source", "Step", "Text", "ToolCallDelta", "ToolCallEnd", "ToolCallStart", "ToolResult", "Usage",
           "continuable", "decode", "encode", "is_part", "kind_of", "text_of"]

# What starts an entry that is a typed part.  A NUL: no tokenizer emits it as text, and a text that does
# begin with one is stored as a JSON text part (``encode``), so the mark cannot be forged.
PART_MARK = "\x00"
# Why an answer ended, in the words the dialects share (OpenAI's ``finish_reason`` and the AI SDK's
# ``finishReason`` both have these).
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "error", "other")


class PartError(ValueError):
    """A part that is not one, or not legal where it stands; the message names it (and its index, where known)."""


def _text(owner: str, name: str, value: object, *, empty: bool = True) -> None:
    if not isinstance(value, str) or (not empty and not value):
        raise PartError(f"{owner}'s {name} must be a{'' if empty else ' non-empty'} string, got {value!r}")


def _json_value(owner: str, name: str, value: object) -> None:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise PartError(f"{owner}'s {name} must be a JSON value, got {value!r} ({exc})") from None


@dataclass(frozen=True, slots=True)
class Text:
    """A piece of the answer's text.  A model may yield a plain ``str`` instead: the log keeps only the str."""

    kind: ClassVar[str] = "text"
    text: str

    def __post_init__(self) -> None:
        _text("a text part", "text", self.text)


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A piece of the model's reasoning (vLLM's ``delta.reasoning``, DeepSeek's and SGLang's ``reasoning_content``)."""

    kind: ClassVar[str] = "reasoning"
    text: str

    def __post_init__(self) -> None:
        _text("a reasoning part", "text", self.text)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A piece of a refusal (OpenAI's ``delta.refusal``): the model declines, in words."""

    kind: ClassVar[str] = "refusal"
    text: str

    def __post_init__(self) -> None:
        _text("a refusal part", "text", self.text)


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool call begins: its id (unique in the answer) and the tool's name."""

    kind: ClassVar[str] = "tool-call-start"
    call_id: str
    name: str

    def __post_init__(self) -> None:
        _text("a tool call's start", "call_id", self.call_id, empty=False)
        _text("a tool call's start", "name", self.name, empty=False)


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a started tool call's arguments, as JSON text."""

    kind: ClassVar[str] = "tool-call-delta"
    call_id: str
    arguments: str

    def __post_init__(self) -> None:
        _text("a tool call's argument delta", "call_id", self.call_id, empty=False)
        _text("a tool call's argument delta", "arguments", self.arguments)


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """A tool call's arguments are complete: ``input`` is them parsed (a JSON value)."""

    kind: ClassVar[str] = "tool-call-end"
    call_id: str
    input: Any

    def __post_init__(self) -> None:
        _text("a tool call's end", "call_id", self.call_id, empty=False)
        _json_value("a tool call's end", "input", self.input)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returned for a call (``output``, a JSON value), or why it failed (``error``)."""

    kind: ClassVar[str] = "tool-result"
    call_id: str
    output: Any = None
    error: str | None = None

    def __post_init__(self) -> None:
        _text("a tool result", "call_id", self.call_id, empty=False)
        _json_value("a tool result", "output", self.output)
        if self.error is not None:
            _text("a tool result", "error", self.error)


@dataclass(frozen=True, slots=True)
class Source:
    """A source the answer cites: a URL, or a document (``media_type`` and ``title``, no URL)."""

    kind: ClassVar[str] = "source"
    source_id: str
    url: str | None = None
    title: str | None = None
    media_type: str | None = None
    filename: str | None = None

    def __post_init__(self) -> None:
        _text("a source", "source_id", self.source_id, empty=False)
        for name in ("url", "title", "media_type", "filename"):
            if getattr(self, name) is not None:
                _text("a source", name, getattr(self, name))
        if self.url is None and (self.media_type is None or self.title is None):
            raise PartError(f"a source needs a url, or a media_type and a title (a document), got {self!r}")


@dataclass(frozen=True, slots=True)
class File:
    """A file the answer carries: its URL (a data: URL for inline bytes) and media type."""

    kind: ClassVar[str] = "file"
    url: str
    media_type: str

    def __post_init__(self) -> None:
        _text("a file", "url", self.url, empty=False)
        _text("a file", "media_type", self.media_type, empty=False)


@dataclass(frozen=True, slots=True)
class Data:
    """A custom data part (the AI SDK's ``data-<name>``): a name, a JSON value, an optional id."""

    kind: ClassVar[str] = "data"
    name: str
    data: Any
    data_id: str | None = None

    def __post_init__(self) -> None:
        _text("a data part", "name", self.name, empty=False)
        _json_value("a data part", "data", self.data)
        if self.data_id is not None:
            _text("a data part", "data_id", self.data_id, empty=False)


@dataclass(frozen=True, slots=True)
class Step:
    """A new step of the answer starts here (after a tool's result the model answers again)."""

    kind: ClassVar[str] = "step"


@dataclass(frozen=True, slots=True)
class Usage:
    """What the answer cost, in tokens (the model's own count, where it gives one)."""

    kind: ClassVar[str] = "usage"
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise PartError(f"usage's {f.name} must be an int >= 0, got {value!r}")

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Finish:
    """Why the answer ended, as the model says it: one of ``FINISH_REASONS``."""

    kind: ClassVar[str] = "finish"
    reason: str

    def __post_init__(self) -> None:
        if self.reason not in FINISH_REASONS:
            raise PartError(f"a finish reason must be one of {', '.join(FINISH_REASONS)}; got {self.reason!r}")


Part = (Text | Reasoning | Refusal | ToolCallStart | ToolCallDelta | ToolCallEnd | ToolResult | Source | File | Data
        | Step | Usage | Finish)
_KINDS: dict[str, type[Any]] = {cls.kind: cls for cls in (Text, Reasoning, Refusal, ToolCallStart, ToolCallDelta,
                                                            ToolCallEnd, ToolResult, Source, File, Data, Step, Usage,
                                                            Finish)}
_PART_TYPES = tuple(_KINDS.values())


def is_part(value: object) -> bool:
    """True if ``value`` is one of the part classes (a ``str`` is text, but not a part object)."""
    return isinstance(value, _PART_TYPES)


def encode(part: str | Part) -> str:
    """The log entry of ``part``: a text as it is (the fast path), any other part as the mark and its JSON."""
    if isinstance(part, str):
        return part if part[:1] != PART_MARK else PART_MARK + json.dumps({"type": "text", "text": part},
                                                                          separators=(",", ":"))
    if isinstance(part, Text):
        return encode(part.text)
    if not is_part(part):
        raise PartError(f"a part must be a str or one of tokenwire.core.parts' classes, got {part!r}")
    body = {"type": part.kind, **{k: v for k, v in asdict(part).items() if v is not None}}
    return PART_MARK + json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def decode(entry: str) -> str | Part:
    """The part a log entry holds: a ``str`` for text, else the part; ``PartError`` naming an entry that is none."""
    if entry[:1] != PART_MARK:
        return entry
    try:
        body = json.loads(entry[1:])
        cls = _KINDS[body.pop("type")]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise PartError(f"a log entry that is no part: {entry[:80]!r}") from None
    try:
        part = cls(**body)
    except TypeError as exc:
        raise PartError(f"a {cls.kind} part with the wrong fields {sorted(body)}: {exc}") from None
    return part.text if cls is Text else part  # type: ignore[no-any-return]


def kind_of(entry: str) -> str:
    """An entry's kind (``"text"`` for a plain token) without building the part: what counts and filters read."""
    if entry[:1] != PART_MARK:
        return "text"
    end = entry.find('"', 10)                 # '\x00{"type":"' is 9 characters; the kind runs to the next quote
    return entry[10:end] if entry.startswith('{"type":"', 1) and end > 0 else "?"


def text_of(entries: list[str]) -> str:
    """The answer's text: its text entries joined (the escaped ones decoded)."""
    return "".join(e if e[:1] != PART_MARK else _escaped_text(e) for e in entries)


def _escaped_text(entry: str) -> str:
    part = decode(entry)
    return part if isinstance(part, str) else ""


def continuable(entries: list[str]) -> bool:
    """True if an answer logged up to here can be continued by a model from its text: no tool call is open or
    awaits its result (a partial call cannot be continued through chat completions, and guessing one is wrong)."""
    open_calls: set[str] = set()
    awaiting: set[str] = set()
    for entry in entries:
        if entry[:1] != PART_MARK:
            continue
        part = decode(entry)
        if isinstance(part, ToolCallStart):
            open_calls.add(part.call_id)
        elif isinstance(part, ToolCallEnd):
            open_calls.discard(part.call_id)
            awaiting.add(part.call_id)
        elif isinstance(part, ToolResult):
            awaiting.discard(part.call_id)
        elif isinstance(part, Step):
            awaiting.clear()                  # a new step: the model answered after the calls
    return not open_calls and not awaiting


class PartChecker:
    """What may follow what, checked part by part as a model yields them (sans-IO: ``check`` raises or returns).

    A delta or an end names a call that was started and not ended; a call id is started once; a result
    names a call that was made; nothing follows ``Finish`` but ``Usage``.
    """

    __slots__ = ("_ended", "_finished", "_open")

    def __init__(self) -> None:
        self._open: set[str] = set()
        self._ended: set[str] = set()
        self._finished = False

    def check(self, index: int, part: str | Part) -> None:
        """``PartError`` naming ``part`` and ``index`` if it may not stand here."""
        if isinstance(part, str | Text):
            if self._finished:
                raise PartError(f"part {index}: text after the answer's finish")
            return
        problem = self._problem(part)
        if problem is not None:
            raise PartError(f"part {index} ({part!r}): {problem}")

    def _problem(self, part: Part) -> str | None:
        if isinstance(part, Usage):
            return None
        if self._finished:
            return "nothing but usage may follow the answer's finish"
        if isinstance(part, Finish):
            self._finished = True
            return None
        if isinstance(part, ToolCallStart):
            if part.call_id in self._open or part.call_id in self._ended:
                return f"the tool call {part.call_id!r} was started already"
            self._open.add(part.call_id)
        elif isinstance(part, ToolCallDelta | ToolCallEnd):
            if part.call_id in self._ended:
                return f"the tool call {part.call_id!r} has ended already"
            if part.call_id not in self._open:
                return f"the tool call {part.call_id!r} was never started"
            if isinstance(part, ToolCallEnd):
                self._open.discard(part.call_id)
                self._ended.add(part.call_id)
        elif isinstance(part, ToolResult) and part.call_id not in self._ended:
            return f"a result for the tool call {part.call_id!r}, which was never made"
        return None
