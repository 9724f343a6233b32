"""The canned model: a 277-token answer and a seeded timing model.

How this works: the answer is stored as text and cut into tokens by a small
regex that keeps each token's leading space, as a BPE tokenizer's output does
(``"A"``, ``" streaming"``, ``" inference"``, ...), with ``"\\n\\n"`` as its own
paragraph token.  ``canned_entries(tokens, "tools")`` is the same answer with every kind of
part around it: it reasons, says it will check the weather, calls
``get_weather({"city": "Paris"})`` with its arguments in pieces, gets the
result, and in a second step writes the answer's ``tokens`` tokens; then
its usage and finish.  (``"text"``, the default, is the text alone, what the
report shows.)  The timing of every step is drawn once per run from
``random.Random(seed)``, so a step's cost depends only on ``(seed, index)``:
a resumed stream that generates index 40 pays exactly what an uninterrupted
one would have.  ``Model`` counts its steps per index, which is how the tests
prove that a resume never runs the model twice for the same index.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from .parts import Finish, Reasoning, Step, ToolCallDelta, ToolCallEnd, ToolCallStart, ToolResult, Usage, encode

__all__ = ["ANSWER", "ANSWER_TEXT", "PARTS_ANSWERS", "QUESTION", "Model", "Steps", "TimingModel", "answer",
           "canned_entries", "tokenize"]

QUESTION = "what should happen when the consumer is slower than the producer"

ANSWER_TEXT = (
    "A streaming inference server produces tokens at the speed of the model, and the reader takes them at "
    "the speed of its network and screen. When the consumer is slower, the difference has to live somewhere, "
    "so put it in a small bounded buffer you chose on purpose.\n\n"
    "Then decide what a full buffer means. Block: the producer waits, nothing is lost, and the whole answer "
    "slows to the reader's pace. Drop the newest or the oldest token: the producer never waits, but the reader "
    "gets an answer with holes, which is only acceptable for state that the next message replaces. Disconnect: "
    "cut the slow reader off and let it resume from its last event id.\n\n"
    "Never use an unbounded queue. It hides the problem until memory runs out, and one slow reader per stream "
    "is enough to take the process down. Number every event, keep the generated tokens in a log, and when a "
    "reader reconnects with Last-Event-ID, replay what it missed and continue from the next index, without "
    "running the model twice.\n\n"
    "Measure it too: time to first token, the gaps between tokens at the reader, how full the buffer got, and how "
    "long the producer waited. Those four numbers tell you which policy your users are paying for, and whether the "
    "cost lands on the model, the memory, or the person reading. Start with block, then measure it again under load."
)

_TOKEN = re.compile(r"\n\n|[ ]?[A-Za-z]+|'[a-z]+|[ ]?[0-9]+|[ ]?[^\sA-Za-z0-9]")


def tokenize(text: str) -> tuple[str, ...]:
    """Cut ``text`` into tokens that carry their own leading whitespace.

    Returns the tokens; raises ``ValueError`` if they would not join back to
    ``text`` (a character the pattern does not cover).
    """
    tokens = tuple(_TOKEN.findall(text))
    if "".join(tokens) != text:
        raise ValueError(f"text is not covered by the token pattern: {text!r}")
    return tokens


ANSWER: tuple[str, ...] = tokenize(ANSWER_TEXT)


@functools.lru_cache(maxsize=len(ANSWER) + 1)
def answer(tokens: int) -> tuple[str, ...]:
    """The first ``tokens`` tokens of the answer, one tuple shared by every stream of that length."""
    return ANSWER[:tokens]

# What the canned answer may be made of: its text alone (what the report shows), or every kind of part around it.
PARTS_ANSWERS = ("text", "tools")
# The "tools" answer's parts before the text and after it (``canned_entries``).
_REASONING = ("The question is about a slow reader. ", "Before answering, ", "a tool call shows how one streams: ",
              "the weather in Paris.")
_CALL_ID = "call_weather_1"
_ARGUMENTS = ('{"ci', 'ty": ', '"Par', 'is"}')
_RESULT = {"city": "Paris", "temperature_c": 18, "sky": "sunny"}
_BEFORE = (*(encode(Reasoning(text)) for text in _REASONING), *tokenize("Let me check the weather first."),
           encode(ToolCallStart(_CALL_ID, "get_weather")), *(encode(ToolCallDelta(_CALL_ID, a)) for a in _ARGUMENTS),
           encode(ToolCallEnd(_CALL_ID, {"city": "Paris"})), encode(ToolResult(_CALL_ID, _RESULT)), encode(Step()),
           *tokenize(" It is 18 degrees and sunny in Paris. Now, the answer.\n\n"))


@functools.lru_cache(maxsize=2 * (len(ANSWER) + 1))
def canned_entries(tokens: int, parts: str = "text") -> tuple[str, ...]:
    """The log entries of the canned answer of ``tokens`` tokens made of ``parts`` (one of ``PARTS_ANSWERS``)."""
    if parts == "text":
        return answer(tokens)
    if parts != "tools":
        raise ValueError(f"parts must be one of {', '.join(PARTS_ANSWERS)}; got {parts!r}")
    usage = Usage(input_tokens=len(QUESTION.split()), output_tokens=len(_BEFORE) + tokens,
                  reasoning_tokens=len(_REASONING))
    return (*_BEFORE, *answer(tokens), encode(usage), encode(Finish("stop")))


_MS = 1_000_000
# Timing models whose step costs are kept (one tuple each, shared by every
# stream of that model): a server's streams use a handful of settings.
COSTS_CACHE = 64


@dataclass(frozen=True, slots=True)
class TimingModel:
    """How long the model takes per step, in integer nanoseconds.

    ttft_ns: cost of the first step (prompt processing); step_ns: nominal cost
    of every later step; jitter: uniform relative spread in [0, 1);
    stall_at/stall_ns: one extra pause before that index (None for none);
    seed: drives the jitter, so the same seed gives the same run.
    """

    step_ns: int = _MS // 2
    ttft_ns: int = 800_000
    jitter: float = 0.1
    stall_at: int | None = None
    stall_ns: int = 0
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("step_ns", "ttft_ns", "stall_ns"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative int of nanoseconds, got {value!r}")
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter!r}")
        if self.stall_at is not None and self.stall_at < 0:
            raise ValueError(f"stall_at must be a non-negative index or None, got {self.stall_at!r}")

    @functools.lru_cache(maxsize=COSTS_CACHE)  # noqa: B019 - a frozen, hashable model: the cache is by value
    def costs(self, n: int) -> tuple[int, ...]:
        """Return the cost in ns of steps ``0..n-1``; the same for the same seed (one tuple shared per model)."""
        rng = random.Random(self.seed)
        out = []
        for index in range(n):
            base = self.ttft_ns if index == 0 else self.step_ns
            cost = round(base * (1.0 + self.jitter * (2.0 * rng.random() - 1.0)))
            if index == self.stall_at:
                cost += self.stall_ns
            out.append(cost)
        return tuple(out)


class Steps(Mapping[int, int]):
    """How many times each index was generated: a mapping of the generated indices, one byte per index.

    A server keeps a model per stream for as long as the stream may be
    resumed, so the count is a ``bytearray`` (saturating at 255, which no
    correct run comes near), not a dict of hundreds of boxed ints.
    """

    __slots__ = ("_counts",)

    def __init__(self, n: int) -> None:
        self._counts = bytearray(n)

    def __getitem__(self, index: int) -> int:
        if not 0 <= index < len(self._counts) or not self._counts[index]:
            raise KeyError(index)
        return self._counts[index]

    def __iter__(self) -> Iterator[int]:
        return (i for i, count in enumerate(self._counts) if count)

    def __len__(self) -> int:
        return len(self._counts) - self._counts.count(0)

    def __repr__(self) -> str:
        return f"Steps({dict(self)!r})"


class Model:
    """A fake model that yields ``tokens[i]`` at a cost and counts each step.

    ``steps`` counts every generation per index: a correct resume leaves each
    count at exactly one.  The tokens and the costs are tuples shared by
    every model of the same answer and timing.
    """

    __slots__ = ("_counts", "cost_ns", "steps", "timing", "tokens")

    cost_ns: Callable[[int], int]
    """Return how long generating an index takes (ns): the costs' own ``__getitem__``, called once a token."""

    def __init__(self, tokens: tuple[str, ...], timing: TimingModel) -> None:
        if not tokens:
            raise ValueError("tokens must not be empty")
        self.tokens = tokens
        self.timing = timing
        self.cost_ns = timing.costs(len(tokens)).__getitem__
        self.steps = Steps(len(tokens))
        self._counts = self.steps._counts      # what ``generate`` counts in

    def __len__(self) -> int:
        return len(self.tokens)

    def generate(self, index: int) -> str:
        """Run one model step; returns the token and counts the step in its ``steps``."""
        counts = self._counts
        if counts[index] < 255:
            counts[index] += 1
        return self.tokens[index]

    @property
    def total_steps(self) -> int:
        return sum(self.steps.values())
