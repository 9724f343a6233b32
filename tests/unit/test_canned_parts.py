"""The canned answer with parts (``?parts=tools``): it reasons, writes text, calls get_weather with its arguments
in pieces, gets the result, writes the answer in a second step, then its usage and finish; the default stays the
text alone (what the report shows), and a bad value is a 400 naming ``parts``."""

from __future__ import annotations

import pytest

from tokenwire.core.model import ANSWER_TEXT, answer, canned_entries
from tokenwire.core.parts import PartChecker, Reasoning, decode, kind_of, text_of
from tokenwire.core.pipeline import RunSpec
from tokenwire.endpoints.live_stream import spec_from_meta, spec_to_meta
from tokenwire.endpoints.params import RequestError, spec_from_query

KINDS = (["reasoning"] * 4 + ["text"] * 7 + ["tool-call-start"] + ["tool-call-delta"] * 4
         + ["tool-call-end", "tool-result", "step"])


def test_parts_tools_makes_every_kind_of_part_around_the_answers_tokens() -> None:
    spec, cut = spec_from_query("parts=tools&tokens=20")
    entries = list(spec.model().tokens)
    assert cut is None and spec.parts == "tools" and spec.length == len(entries) == len(KINDS) + 15 + 20 + 2
    assert [kind_of(entry) for entry in entries] == [*KINDS, *["text"] * 35, "usage", "finish"]
    assert entries[len(KINDS) + 15:-2] == list(answer(20))            # the second step ends in the answer's tokens
    assert "".join(p.text for p in map(decode, entries) if isinstance(p, Reasoning)).endswith("the weather in Paris.")
    assert text_of(entries) == ("Let me check the weather first. It is 18 degrees and sunny in Paris. Now, the "
                                "answer.\n\n" + "".join(answer(20)))
    checker = PartChecker()
    for index, entry in enumerate(entries):
        checker.check(index, decode(entry))                         # every part stands where it may
    tool = [decode(e) for e in entries if kind_of(e).startswith("tool-call-delta")]
    assert "".join(p.arguments for p in tool) == '{"city": "Paris"}'  # type: ignore[union-attr]


def test_the_default_is_the_text_alone_as_the_report_shows_it() -> None:
    spec, _ = spec_from_query("tokens=277")
    assert spec.parts == "text" and spec.model().tokens == answer(277) and "".join(answer(277)) == ANSWER_TEXT
    assert spec_from_query("parts=text")[0] == spec_from_query("")[0] and spec_from_query("")[0].parts == "text"


def test_a_bad_parts_value_is_a_400_naming_it() -> None:
    with pytest.raises(RequestError) as refused:
        spec_from_query("parts=images")
    assert (refused.value.status, refused.value.message) == (400, "parts must be one of text, tools; got 'images'")
    with pytest.raises(ValueError, match=r"^parts must be one of text, tools; got 'x'$"):
        RunSpec(parts="x")


def test_a_cut_may_fall_on_any_part() -> None:
    spec, cut = spec_from_query("parts=tools&tokens=5&cut_after=40")
    assert (spec.length, cut) == (41, 40)
    with pytest.raises(RequestError, match="got '41'"):
        spec_from_query("parts=tools&tokens=5&cut_after=41")


def test_the_spec_in_the_log_keeps_its_parts_and_an_older_one_is_text() -> None:
    spec = RunSpec(parts="tools")
    assert spec_from_meta(spec_to_meta(spec)) == spec
    older = spec_to_meta(RunSpec())
    del older["spec"]["parts"]
    assert spec_from_meta(older).parts == "text"
    assert canned_entries(3) == answer(3)
