"""Every JSON body is read by one function (``endpoints.bodies.json_object``): its nesting is bounded without
recursion, a lone surrogate is refused naming its field, and the strings a route echoes or keeps are bounded;
the proxy reads ``messages`` and ``input`` item by item (``upstream.messages``).

Before, 5,000 or 100,000 ``[`` raised ``RecursionError`` (a 500), ``"\\ud800"`` in ``tokens`` crashed in
``urlencode`` (a 500), a 1 MB ``model`` was echoed in every chunk, and ``"messages": [1]`` made the proxy's
``dict(message)`` raise.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwire.asgi.model_stream import StreamRequest
from tokenwire.endpoints.bodies import MAX_ID_CHARS, MAX_JSON_DEPTH, MAX_MODEL_CHARS, json_object
from tokenwire.endpoints.chat import parse_chat
from tokenwire.endpoints.decisions import ChatRequest, OpenAIRequest
from tokenwire.endpoints.openai import parse_openai
from tokenwire.endpoints.params import RequestError
from tokenwire.upstream.messages import messages_of

DEEP = "the body is JSON nested deeper than 64 levels"


def refused(body: bytes, what: str = "the body") -> str:
    with pytest.raises(RequestError) as raised:
        json_object(body, what)
    assert raised.value.status == 400
    return raised.value.message


def nested(depth: int, inner: bytes = b"") -> bytes:
    """An object whose field ``x`` is ``depth - 1`` levels of arrays and objects around ``inner``."""
    opens = b"".join(b"[" if level % 2 else b'{"k":' for level in range(depth - 1))
    closes = b"".join(b"]" if level % 2 else b"}" for level in reversed(range(depth - 1)))
    return b'{"x":' + opens + (inner or b"0") + closes + b"}"


def test_the_limit_is_64_levels_counted_as_json_counts_them() -> None:
    assert MAX_JSON_DEPTH == 64
    json_object(nested(64), "the body")
    assert refused(nested(65)) == DEEP


@pytest.mark.parametrize("levels", [5_000, 100_000])
def test_thousands_of_levels_are_a_400_not_a_recursion_error(levels: int) -> None:
    assert refused(b"[" * levels + b"]" * levels) == DEEP
    assert refused(b'{"messages": ' + b"[" * levels + b"]" * levels + b"}") == DEEP
    assert refused(b"[" * levels) == DEEP                              # unclosed, past what json can read
    assert refused(b'{"a": 1, "x": ' + b"[" * levels + b"]" * levels + b"}", "a chat body") == \
        "a chat body is JSON nested deeper than 64 levels"


def test_brackets_inside_strings_are_text() -> None:
    strings = json.dumps({"a": "[" * 500, "b": "}" * 500, "c": '\\"[[[', "d": "\\" * 7 + "[" * 90}).encode()
    assert json_object(strings, "the body")["a"] == "[" * 500
    # 101 levels whose strings make the brackets, counted with theirs, balanced and never past 61.
    fooled = b'{"x": ' + b"[" * 50 + b'"' + b"]" * 40 + b'", ' + b"[" * 50 + b"1" + b"]" * 40 + b', "' + \
        b"[" * 40 + b'"' + b"]" * 60 + b"}"
    assert depth_of(json.loads(fooled)) == 101
    assert refused(fooled) == DEEP


def test_a_body_that_is_no_json_says_so_whatever_its_brackets() -> None:
    assert refused(b"]" * 200).startswith("the body must be JSON: ")
    assert refused(b'{"x": [' + b"]" * 100 + b"}").startswith("the body must be JSON: ")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"])
def test_a_body_in_another_unicode_encoding_is_refused_before_its_checks_are_fooled(encoding: str) -> None:
    """UTF-16 and UTF-32 bytes hide a lone surrogate and every bracket from the checks that read UTF-8."""
    for body in ('{"model": "m\\ud800"}', '{"x": ' + "[" * 960 + "]" * 960 + "}"):
        message = refused(body.encode(encoding))
        assert message.startswith("the body must be JSON in UTF-8, got what reads as UTF-"), message
    assert json_object(b'\xef\xbb\xbf{"a": 1}', "the body") == {"a": 1}      # UTF-8's byte order mark is UTF-8


@pytest.mark.parametrize(("body", "message"), [
    (b'{"temperature": NaN}', "it holds NaN, which is no JSON number (JSON has no NaN or Infinity)"),
    (b'{"temperature": Infinity}', "it holds Infinity, which is no JSON number (JSON has no NaN or Infinity)"),
    (b'{"top_p": -Infinity}', "it holds -Infinity, which is no JSON number (JSON has no NaN or Infinity)"),
    (b'{"temperature": 1e400}', "it holds the number '1e400', past a double's range"),
    (b'{"tokens": ' + b"9" * 4001 + b"}", "it holds an integer of 4001 digits, longer than the 100 any field takes"),
    (b'{"seed": -' + b"1" * 101 + b"}", "it holds an integer of 101 digits, longer than the 100 any field takes"),
])
def test_numbers_json_has_not_are_refused_in_its_own_words(body: bytes, message: str) -> None:
    assert refused(body) == f"the body must be JSON: {message}"


def test_numbers_json_has_are_read() -> None:
    assert json_object(b'{"a": -' + b"9" * 100 + b', "b": 1.5e300, "c": 5e-400, "d": -0}', "the body") == \
        {"a": -int("9" * 100), "b": 1.5e300, "c": 0.0, "d": 0}


def depth_of(value: Any) -> int:
    todo, deepest = [(value, 1)], 0
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            todo.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


TEXT = st.text(alphabet='[]{}"\\ab', max_size=8)


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    value: Any = draw(TEXT)
    for _ in range(draw(st.integers(0, 80))):
        siblings = draw(st.lists(TEXT, max_size=2))
        value = [*siblings, value] if draw(st.booleans()) else {s: s for s in siblings} | {"v": value}
    return {"x": value}


@settings(max_examples=200, deadline=None)
@given(bodies())
def test_a_body_is_refused_exactly_when_it_is_deeper_than_the_limit(data: dict[str, Any]) -> None:
    body = json.dumps(data).encode()
    if depth_of(data) > MAX_JSON_DEPTH:
        assert refused(body) == DEEP
    else:
        assert json_object(body, "the body") == data


@pytest.mark.parametrize(("body", "field", "code"), [
    (b'{"tokens": "\\ud800"}', "tokens", "U+D800"),
    (b'{"tokens": "\xed\xa0\x80"}', "tokens", "U+D800"),
    (b'{"seed": "5\\udfff"}', "seed", "U+DFFF"),
    (b'{"cut_after": "\\ud83d"}', "cut_after", "U+D83D"),              # a pair's first half, alone
    (b'{"messages": [{"content": "ok"}, {"content": "x\\udc00"}]}', "messages[1].content", "U+DC00"),
])
def test_a_lone_surrogate_is_refused_naming_its_field(body: bytes, field: str, code: str) -> None:
    assert refused(body) == (f"the body's field {field!r} holds a value with a lone surrogate ({code}), which is "
                             f"no text: send Unicode text, as UTF-8")


def test_a_lone_surrogate_in_a_key_is_refused_too() -> None:
    assert refused(b'{"a": {"\\ud800": 1}}') == ("the body's field 'a.\\ud800' holds a key with a lone surrogate "
                                                 "(U+D800), which is no text: send Unicode text, as UTF-8")


def test_a_surrogate_pair_and_an_escaped_backslash_are_text() -> None:
    assert json_object(b'{"t": "\\ud83d\\ude00"}', "the body") == {"t": "\U0001f600"}
    assert json_object(b'{"t": "\\\\ud800"}', "the body") == {"t": "\\ud800"}


def openai_body(**fields: object) -> bytes:
    return json.dumps({"model": "m", "messages": [], **fields}).encode()


def test_model_is_at_most_256_characters() -> None:
    assert MAX_MODEL_CHARS == 256
    assert parse_openai(openai_body(model="m" * 256), "chat.completions").model == "m" * 256
    with pytest.raises(RequestError) as raised:
        parse_openai(openai_body(model="m" * 1_000_000), "responses")
    assert raised.value.message == "the body's 'model' is 1000000 characters; at most 256 are taken"


@pytest.mark.parametrize("name", ["previous_response_id", "user"])
def test_an_id_an_openai_body_carries_is_bounded(name: str) -> None:
    parse_openai(openai_body(**{name: "i" * MAX_ID_CHARS}), "chat.completions")
    with pytest.raises(RequestError) as raised:
        parse_openai(openai_body(**{name: "i" * (MAX_ID_CHARS + 1)}), "chat.completions")
    assert raised.value.message == f"the body's {name!r} is 257 characters; at most 256 are taken"
    with pytest.raises(RequestError) as raised:
        parse_openai(openai_body(**{name: 5}), "chat.completions")
    assert raised.value.message == f"the body's {name!r} must be a string, got '5'"


@pytest.mark.parametrize("name", ["messageId", "trigger"])
def test_a_chat_bodys_ids_are_bounded(name: str) -> None:
    parse_chat(json.dumps({"messages": [], name: "i" * MAX_ID_CHARS}).encode())
    with pytest.raises(RequestError) as raised:
        parse_chat(json.dumps({"messages": [], name: "i" * 100_000}).encode())
    assert raised.value.message == f"a chat body's {name!r} is 100000 characters; at most 256 are taken"


def proxied(api: str, **body: Any) -> StreamRequest:
    openai = OpenAIRequest(api, "m", tuple(body.get("messages", ())), body.get("input"), False, False, body)
    return StreamRequest("s", {}, b"", "c", openai=openai)


@pytest.mark.parametrize(("items", "message"), [
    ([1], "messages[0] must be a message, an object with a \"role\", got '1'"),
    ([None], "messages[0] must be a message, an object with a \"role\", got 'null'"),
    (["ab"], "messages[0] must be a message, an object with a \"role\", got '\"ab\"'"),
    ([{"role": "user", "content": "hi"}, {"content": "x"}],
     "messages[1] must be a message with a \"role\", a string, got 'null'"),
])
def test_the_proxy_reads_a_chat_completions_messages_item_by_item(items: list[Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        messages_of(proxied("chat.completions", messages=items))
    assert str(raised.value) == message


@pytest.mark.parametrize(("items", "message"), [
    ([1], "input[0] must be a message, an object with a \"role\", got '1'"),
    ([{"role": "user", "content": "hi"}, {"content": "x"}],
     "input[1] must be a message with a \"role\", a string, got 'null'"),
    ([{"type": "function_call_output", "output": "x"}], "input[0].call_id must be a string, got 'null'"),
    ([{"role": "user", "content": 5}], "input[0].content must be a string or a list of parts, got '5'"),
])
def test_the_proxy_reads_a_responses_input_item_by_item(items: list[Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        messages_of(proxied("responses", input=items))
    assert str(raised.value) == message


def test_good_items_go_as_they_came() -> None:
    chat = [{"role": "user", "content": "hi", "name": "a"}]
    assert messages_of(proxied("chat.completions", messages=chat)) == chat
    given = [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    assert messages_of(proxied("responses", input=given)) == [{"role": "user", "content": "hi"}]
    ui = ChatRequest(None, ({"parts": [{"type": "text", "text": "yo"}]},), None, None, {})
    assert messages_of(StreamRequest("s", {}, b"", "c", chat=ui)) == [{"role": "user", "content": "yo"}]
    with pytest.raises(ValueError, match=r"^messages\[0\] must be a message, an object"):
        messages_of(StreamRequest("s", {}, b"", "c", chat=ChatRequest(None, (7,), None, None, {})))
