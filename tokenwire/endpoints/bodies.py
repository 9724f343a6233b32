"""A request's JSON body, read once by one function: its nesting, its lone surrogates, the strings a route keeps (pure).

How this works: ``json_object`` checks the nesting before ``json.loads``
sees the body, since json's C parser recurses once per level and 100,000
``[`` raise ``RecursionError`` (a 500).  The check needs no recursion and
runs in C-level calls: a body with at most ``MAX_JSON_DEPTH`` brackets
cannot be deeper and is not scanned; otherwise the text outside its strings
(escapes dropped, then split on quotes) is cut to its brackets, all made one
kind, and loses its innermost pairs once per pass; one still left after
``MAX_JSON_DEPTH`` passes is nested deeper (or is no JSON, which
``json.loads`` then says).  ``json.loads`` reads ``\\ud800`` and the raw bytes
``\\xed\\xa0\\x80`` as a lone surrogate, a ``str`` no UTF-8 encoding (nor
``urlencode``) can take: a body that may hold one is encoded once to find
out, and then walked, without recursion, to name the field.  A body is read
as UTF-8 only (``json.loads`` would also take UTF-16 and UTF-32, whose bytes
the nesting and surrogate checks do not read), and as strict JSON: no
``NaN`` or ``Infinity``, no number past a double's range, no integer longer
than ``MAX_INT_DIGITS`` (each refused by ``json.loads``'s own hooks, so the
message says what it is rather than Python's conversion limit).  ``text_field``
reads a string field within its length limit: an id, a model name, each a
named limit, since what a route keeps or echoes must be small.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .params import RequestError, echo

__all__ = ["MAX_ID_CHARS", "MAX_INT_DIGITS", "MAX_JSON_DEPTH", "MAX_MODEL_CHARS", "depth_error", "field_of",
           "json_object", "text_field"]

# 64 levels: an OpenAI or AI SDK body is at most about six deep (messages, a message, its parts, a part, a tool
# call's arguments); json's C parser (and json.dumps, the echo of a bad value) recurses once per level, and
# 100,000 levels exhaust Python's stack.
MAX_JSON_DEPTH = 64
# 256 characters: a model's name is short (OpenAI's are under 40, a Hugging Face repo id 96 at most), and it is
# echoed in every chunk: a 1 MB name made a 279 MB answer, and every response's kept record held it.
MAX_MODEL_CHARS = 256
# 256 characters: an id the body carries (messageId, trigger, previous_response_id, user) is a UUID (36), an
# AI SDK id (16) or an OpenAI id (about 50); one passed on or kept is not a place for a megabyte.
MAX_ID_CHARS = 256
# 100 digits: no field of any body takes an integer near that long (a seed, a count, a timestamp in ns are under
# 20 digits); past 4,300 Python refuses the conversion in its own words, and converting one costs time quadratic
# in its length.
MAX_INT_DIGITS = 100

# A lone surrogate may come in as the raw bytes of one (json reads bytes with 'surrogatepass') or as an escape.
_MAYBE_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]|\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# A number that may pass MAX_INT_DIGITS or a double's range holds a run of more digits than that, or an exponent
# of three digits (one of two cannot pass 1.8e308): found in a copy with every digit a 0 (bytes.translate and a
# substring search run in C; a regex took twice json.loads's time).  Most bodies hold none, and are read without a
# call a number.
_ZEROED = bytes.maketrans(b"123456789E", b"000000000e")
_LONG_RUNS = (b"0" * (MAX_INT_DIGITS + 1), b"e000", b"e+000", b"e-000")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def depth_error(what: str) -> RequestError:
    """The 400 for a body nested deeper than ``MAX_JSON_DEPTH``."""
    return RequestError(400, f"{what} is JSON nested deeper than {MAX_JSON_DEPTH} levels")


def _too_deep(body: bytes) -> bool:
    """Whether ``body``'s brackets outside its strings may nest deeper than ``MAX_JSON_DEPTH`` (see the module)."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return False
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(_ONE_KIND, _NOT_BRACKETS)
    for _ in range(MAX_JSON_DEPTH):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return bool(brackets)


def _long_number(body: bytes) -> bool:
    zeroed = body.translate(_ZEROED)
    return any(run in zeroed for run in _LONG_RUNS)


def _int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"it holds an integer of {digits} digits, longer than the {MAX_INT_DIGITS} any field takes")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"it holds the number {echo(text)}, past a double's range")
    return value


def _constant(name: str) -> Any:
    raise ValueError(f"it holds {name}, which is no JSON number (JSON has no NaN or Infinity)")


def json_object(body: bytes, what: str) -> dict[str, Any]:
    """``body`` read as a JSON object; raises ``RequestError`` 400 naming ``what`` (``"a chat body"``) and the fault.

    Refused: a body that is not UTF-8, no strict JSON (see the module), nested
    deeper than ``MAX_JSON_DEPTH``, not an object, or holding a lone surrogate
    (named by its field).
    """
    encoding = json.detect_encoding(body)
    if not encoding.startswith("utf-8"):
        raise RequestError(400, f"{what} must be JSON in UTF-8, got what reads as {encoding.upper()}")
    deep = _too_deep(body)
    try:
        text = body.decode(encoding, "surrogatepass")
        if _long_number(body):             # only a number this long can pass a bound: the hooks cost a call each
            data = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
        else:
            data = json.loads(text, parse_constant=_constant)
    except RecursionError:
        raise depth_error(what) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise RequestError(400, f"{what} must be JSON: {exc}") from None
    if deep:                               # JSON, and deeper than the limit (or past what json could read)
        raise depth_error(what)
    if not isinstance(data, dict):
        raise RequestError(400, f"{what} must be a JSON object, got {type(data).__name__}")
    if _MAYBE_SURROGATE.search(body):
        _check_text(data, what)
    return data


def _check_text(data: dict[str, Any], what: str) -> None:
    """Raise ``RequestError`` 400 naming the first field of ``data`` that holds a lone surrogate, if one does."""
    try:
        json.dumps(data, ensure_ascii=False).encode()
        return
    except UnicodeEncodeError:
        pass
    todo: list[tuple[str, Any]] = [("", data)]
    while todo:
        path, value = todo.pop()
        if isinstance(value, str) and _SURROGATE.search(value):
            raise _surrogate_error(what, path, value)
        if isinstance(value, dict):
            for key, item in value.items():
                if _SURROGATE.search(key):
                    raise _surrogate_error(what, f"{path}.{key}" if path else key, key, "a key")
                todo.append((f"{path}.{key}" if path else key, item))
        elif isinstance(value, list):
            todo.extend((f"{path}[{index}]", item) for index, item in enumerate(value))


def _surrogate_error(what: str, path: str, text: str, kind: str = "a value") -> RequestError:
    found = _SURROGATE.search(text)
    code = f"U+{ord(found.group()):04X}" if found else "a surrogate"
    return RequestError(400, f"{what}'s field {echo(path)} holds {kind} with a lone surrogate ({code}), "
                             f"which is no text: send Unicode text, as UTF-8")


def field_of(data: dict[str, Any], what: str, name: str, kind: type | tuple[type, ...], kind_name: str) -> Any:
    """``data[name]``, which must be of ``kind`` (``kind_name``: ``"a list"``); raises ``RequestError`` 400."""
    if not isinstance(data.get(name), kind):
        raise RequestError(400, f"{what} needs \"{name}\", {kind_name}, got {echo(json.dumps(data.get(name)))}")
    return data[name]


def text_field(data: dict[str, Any], what: str, name: str, limit: int = MAX_ID_CHARS) -> str | None:
    """``data[name]``: None if absent or null, else a string of at most ``limit`` characters (``RequestError``)."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RequestError(400, f"{what}'s {name!r} must be a string, got {echo(json.dumps(value))}")
    if len(value) > limit:
        raise RequestError(400, f"{what}'s {name!r} is {len(value)} characters; at most {limit} are taken")
    return value
