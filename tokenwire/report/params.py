"""The report's parameters: one validated record from a query string or CLI flags.

How this works: both front doors reduce their input to pairs of
``(name, raw string)`` and hand them to one validator, so ``?reader_ms=3``
and ``--reader-ms 3`` are refused or accepted with the same message.  The
validator is strict on purpose: a parameter it does not know, a value it
cannot read, a value out of range or a parameter given twice is an error
(``ParamError``, a ``ValueError`` whose message is one line naming the
parameter, the value given and what is allowed), never silently ignored or
clamped.  Numbers are plain decimals (``3``, ``0.5``, ``.5``): no sign, no
exponent, no ``nan``/``inf``, no ``_`` separators, which ``float()`` would
all accept.

``cut_after`` defaults to 18, or to half the answer when the answer is 18
tokens or shorter, so that ``?tokens=10`` alone is valid; an explicit value
must be from 0 to ``tokens - 1`` (``cut_after_message``: one range and one
message for the report, ``/live``, the command and the demo).  An empty
``cut_after`` is the default too: the page's form leaves the field blank so
that the cut follows whatever ``tokens`` the visitor picks.  The live
endpoints parse ``POST /streams?...`` with it too (``tokenwire.endpoints.params``).  Messages name
parameters as the query does (``reader_ms``) or, from ``parse_cli``, as flags
(``--reader-ms``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import TypedDict, cast
from urllib.parse import quote, unquote_plus

from ..core.model import ANSWER

__all__ = [
    "DEFAULTS",
    "FORMATS",
    "SCENARIOS",
    "ParamError",
    "ReportParams",
    "cli_usage",
    "cut_after_message",
    "parse_cli",
    "parse_pairs",
    "parse_query",
]


class ParamError(ValueError):
    """A bad parameter; ``str(error)`` is the one-line message for the visitor."""


class Scenario(StrEnum):
    BASELINE = "baseline"
    BLOCK = "block"
    DROP_NEWEST = "drop-newest"
    DROP_OLDEST = "drop-oldest"
    DISCONNECT = "disconnect"


SCENARIOS = tuple(s.value for s in Scenario)
SCENARIO_ALIASES = {"drop": Scenario.DROP_NEWEST.value}
# The scenarios as --help and a refusal list them, each alias beside its own: "drop-newest (or drop)".
SCENARIO_CHOICES = ", ".join(
    s + "".join(f" (or {alias})" for alias, target in SCENARIO_ALIASES.items() if target == s) for s in SCENARIOS)
FORMATS = ("text", "json", "html")
CLOCKS = ("virtual", "real")

# Bounds, each with its reason.
MIN_TOKENS = 1                 # one token still shows a frame, a timing and a resume (cut before it)
MAX_TOKENS = len(ANSWER)       # the whole canned answer (277)
MAX_BUFFER = 64                # the baseline's buffer; a slow reader fills any bound eventually
MAX_READER_MS = 100.0          # 10 tokens a second is already a stalled screen
MIN_PRODUCER_MS = 0.01         # a step must cost something, or TTFT and throughput are 0 and infinity
MAX_PRODUCER_MS = 100.0        # slower than any model worth streaming
MAX_SEED = 2**32 - 1           # what a seed field usually holds
DEFAULT_CUT_AFTER = 18
# A query string far longer than nine parameters can need; refuse before parsing.
MAX_QUERY_CHARS = 2048
# Longer values are shortened in messages, so an error never echoes a novel.
MAX_ECHO_CHARS = 40

_INT = re.compile(r"[0-9]{1,10}")
_DECIMAL = re.compile(r"(?:[0-9]{1,6}(?:\.[0-9]{0,6})?|\.[0-9]{1,6})")


def cut_after_message(tokens: int, value: str, label: str = "cut_after") -> str:
    """The one refusal of a ``cut_after`` outside 0..tokens-1 (0: the connection dies before the first token)."""
    return f"{label} must be a whole number from 0 to tokens-1 ({tokens - 1}); got {_echo(value)}"


def default_cut_after(tokens: int) -> int:
    """Return the cut used when none is given: 18, or half of a short answer."""
    return DEFAULT_CUT_AFTER if tokens > DEFAULT_CUT_AFTER else tokens // 2


def _plain(value: object) -> str:
    """Return ``value`` as the visitor would type it (``3`` rather than ``3.0``)."""
    if isinstance(value, float):
        return f"{value:.6f}".rstrip("0").rstrip(".")
    return str(value)


def _echo(value: str) -> str:
    shown = value if len(value) <= MAX_ECHO_CHARS else value[:MAX_ECHO_CHARS] + "..."
    return repr(shown)


@dataclass(frozen=True, slots=True)
class ReportParams:
    """What the visitor asked for; validated, canonical (``drop`` is ``drop-newest``).

    scenario: the part of the page given a detail block; format: text, json
    or html; clock: virtual (deterministic) or real (an event loop, measured);
    tokens: answer length; buffer: channel slots; reader_ms/producer_ms: time
    per token of each side; cut_after: tokens before the resume demo hangs
    up; seed: drives the model's timing jitter.
    """

    scenario: str = Scenario.DISCONNECT.value
    format: str = "text"
    clock: str = "virtual"
    tokens: int = 70
    buffer: int = 4
    reader_ms: float = 3.0
    producer_ms: float = 0.5
    cut_after: int = DEFAULT_CUT_AFTER
    seed: int = 1

    def __post_init__(self) -> None:
        # Built by the parsers, this never fires; it guards direct construction.
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        if _validate({name: _plain(value) for name, value in values.items()}) != values:
            raise ParamError(f"not a canonical ReportParams: {self!r}")

    @property
    def policy(self) -> str:
        """The channel policy this scenario names (``baseline`` reads fast under ``block``)."""
        return Scenario.BLOCK.value if self.scenario == Scenario.BASELINE.value else self.scenario

    @property
    def capacity(self) -> int:
        """The channel capacity, ``buffer`` under the core's name."""
        return self.buffer

    @property
    def reader_label(self) -> str:
        """What the report calls the reader: ``slow reader`` only when it is slower than the producer."""
        return "slow reader" if self.reader_ms > self.producer_ms else "reader"

    def query(self, **changes: object) -> str:
        """Return the query string (no ``?``) for these params with ``changes``, defaults left out."""
        target = replace(self, **changes) if changes else self  # type: ignore[arg-type]
        parts = []
        for f in fields(ReportParams):
            value = getattr(target, f.name)
            if f.name == "cut_after":
                if value == default_cut_after(target.tokens):
                    continue
            elif value == getattr(DEFAULTS, f.name):
                continue
            parts.append(f"{f.name}={quote(_plain(value), safe='')}")
        return "&".join(parts)


NAMES = tuple(f.name for f in fields(ReportParams))


class _Fields(TypedDict):
    """``ReportParams``' fields by name, typed: what the validator returns."""

    scenario: str
    format: str
    clock: str
    tokens: int
    buffer: int
    reader_ms: float
    producer_ms: float
    cut_after: int
    seed: int


# The fields' defaults, read off the class: a ReportParams cannot be made before the validator it runs has them.
_DEFAULT = cast(_Fields, {f.name: f.default for f in fields(ReportParams)})


# ------------------------------------------------------------ validation


def parse_query(query: str) -> ReportParams:
    """Return the parameters in a URL query string (without the ``?``).

    Raises ``ParamError`` for an unknown, repeated, unreadable or
    out-of-range parameter; the message names it, the value and what is
    allowed.  Keys and values are percent-decoded (``+`` is a space).
    """
    if len(query) > MAX_QUERY_CHARS:
        raise ParamError(f"query string is {len(query)} characters; at most {MAX_QUERY_CHARS} are accepted")
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        name, eq, value = part.partition("=")
        name, value = unquote_plus(name), unquote_plus(value)
        if not eq and name in NAMES:
            raise ParamError(f"parameter {name!r} has no value; write it as {name}=VALUE")
        pairs.append((name, value))
    return parse_pairs(pairs)


def parse_pairs(pairs: Iterable[tuple[str, str]], *, flags: bool = False) -> ReportParams:
    """Return the parameters for ``(name, raw value)`` pairs; raises ``ParamError``.

    ``flags``: the pairs came from the command line, so a message names ``--reader-ms``, not ``reader_ms``.
    """
    given: dict[str, str] = {}
    for name, value in pairs:
        if name not in NAMES:
            raise ParamError(f"unknown parameter {_echo(name)} (given {_echo(value)}); "
                             f"allowed: {', '.join(NAMES)}")
        if name in given:
            what = f"flag {_flag(name)}" if flags else f"parameter {name!r}"
            raise ParamError(f"{what} given more than once ({_echo(given[name])} and {_echo(value)}); give it once")
        given[name] = value
    return ReportParams(**_validate(given, _flag if flags else str))


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _validate(given: Mapping[str, str], label: Callable[[str], str] = str) -> _Fields:
    """Return the typed values for raw ``given`` strings, defaults filled in; ``label`` names a parameter."""
    tokens = _int(given, "tokens", MIN_TOKENS, MAX_TOKENS, label)
    tokens = _DEFAULT["tokens"] if tokens is None else tokens
    cut = _int(given, "cut_after", 0, tokens - 1, label) if given.get("cut_after") else None
    buffer, seed = _int(given, "buffer", 1, MAX_BUFFER, label), _int(given, "seed", 0, MAX_SEED, label)
    return {
        "scenario": _scenario(given.get("scenario", _DEFAULT["scenario"]), label),
        "format": _choice(given, "format", FORMATS, _DEFAULT["format"], label),
        "clock": _choice(given, "clock", CLOCKS, _DEFAULT["clock"], label),
        "tokens": tokens,
        "buffer": _DEFAULT["buffer"] if buffer is None else buffer,
        "reader_ms": _decimal(given, "reader_ms", 0.0, MAX_READER_MS, _DEFAULT["reader_ms"], label),
        "producer_ms": _decimal(given, "producer_ms", MIN_PRODUCER_MS, MAX_PRODUCER_MS, _DEFAULT["producer_ms"],
                                label),
        "cut_after": default_cut_after(tokens) if cut is None else cut,
        "seed": _DEFAULT["seed"] if seed is None else seed,
    }


def _scenario(value: str, label: Callable[[str], str]) -> str:
    canonical = SCENARIO_ALIASES.get(value, value)
    if canonical not in SCENARIOS:
        raise ParamError(f"{label('scenario')} must be one of {SCENARIO_CHOICES}; got {_echo(value)}")
    return canonical


def _choice(given: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str,
            label: Callable[[str], str]) -> str:
    value = given.get(name, default)
    if value not in allowed:
        raise ParamError(f"{label(name)} must be one of {', '.join(allowed)}; got {_echo(value)}")
    return value


def _int(given: Mapping[str, str], name: str, low: int, high: int, label: Callable[[str], str]) -> int | None:
    """Return the int given for ``name``, None if absent; raises ``ParamError``."""
    raw = given.get(name)
    if raw is None:
        return None
    if _INT.fullmatch(raw) and low <= int(raw) <= high:
        return int(raw)
    if name == "cut_after":
        raise ParamError(cut_after_message(high + 1, raw, label(name)))
    raise ParamError(f"{label(name)} must be a whole number from {low} to {high}; got {_echo(raw)}")


def _decimal(given: Mapping[str, str], name: str, low: float, high: float, default: float,
             label: Callable[[str], str]) -> float:
    raw = given.get(name)
    if raw is None:
        return float(default)
    if _DECIMAL.fullmatch(raw) and low <= float(raw) <= high:
        return float(raw)
    raise ParamError(f"{label(name)} must be a number of milliseconds from {_plain(low)} to {_plain(high)} "
                     f"(like 3 or 0.5, at most 6 decimals); got {_echo(raw)}")


DEFAULTS = ReportParams()


# ------------------------------------------------------------ command line


def cli_usage(prog: str = "tokenwire report") -> str:
    """Return the ``--help`` text: every flag, its default and its bounds."""
    return "\n".join([
        f"usage: {prog} [--NAME VALUE | --NAME=VALUE ...]",
        "flags mirror the query string; --reader-ms and --reader_ms are the same flag",
        f"  --scenario     {SCENARIO_CHOICES}  [default {DEFAULTS.scenario}]",
        f"  --format       {', '.join(FORMATS)}  [default text]",
        f"  --clock        {', '.join(CLOCKS)}  [default virtual: the same flags print the same bytes]",
        f"  --tokens       {MIN_TOKENS}..{MAX_TOKENS}  [default {DEFAULTS.tokens}]",
        f"  --buffer       1..{MAX_BUFFER}  [default {DEFAULTS.buffer}]",
        f"  --reader-ms    0..{_plain(MAX_READER_MS)}  [default {_plain(DEFAULTS.reader_ms)}]",
        f"  --producer-ms  {_plain(MIN_PRODUCER_MS)}..{_plain(MAX_PRODUCER_MS)}  "
        f"[default {_plain(DEFAULTS.producer_ms)}]",
        f"  --cut-after    0..tokens-1  "
        f"[default {DEFAULT_CUT_AFTER}, or tokens/2 for {DEFAULT_CUT_AFTER} tokens or fewer]",
        f"  --seed         0..{MAX_SEED}  [default {DEFAULTS.seed}]",
    ])


class HelpRequested(Exception):
    """``--help`` was given; the caller prints ``cli_usage()`` and exits 0."""


def parse_cli(argv: list[str]) -> ReportParams:
    """Return the parameters for ``argv`` (``--name value`` or ``--name=value``).

    Raises ``HelpRequested`` for ``-h``/``--help`` and ``ParamError`` for
    anything else that is not a known flag with a valid value.
    """
    pairs: list[tuple[str, str]] = []
    args = iter(argv)
    for arg in args:
        if arg in ("-h", "--help"):
            raise HelpRequested()
        if not arg.startswith("--") or len(arg) == 2:
            raise ParamError(f"unexpected argument {_echo(arg)}; flags look like --tokens 70 (see --help)")
        flag, eq, value = arg[2:].partition("=")
        name = flag.replace("-", "_")
        if name not in NAMES:
            raise ParamError(f"unknown flag {_echo('--' + flag)}; allowed: "
                             f"{', '.join('--' + n.replace('_', '-') for n in NAMES)}")
        if not eq:
            following = next(args, None)
            if following is None:
                raise ParamError(f"flag --{flag} needs a value")
            value = following
        pairs.append((name, value))
    return parse_pairs(pairs, flags=True)
