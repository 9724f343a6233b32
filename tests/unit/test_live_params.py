"""The live endpoints' request parameters (``tokenwire.endpoints.params``): a live stream's parameters split from the
report's, and the resume cursor from ``Last-Event-ID`` or the query, each refusal with its exact message.
"""

from __future__ import annotations

import pytest

from tokenwire.endpoints.params import RequestError, resume_cursor, spec_from_query, split_query


def test_live_parameters_are_split_from_the_report_ones() -> None:
    rest, live = split_query("tokens=30&cut_after=5&scenario=block&last_event_id=3")
    assert rest == [("tokens", "30"), ("scenario", "block")] and live == {"cut_after": "5", "last_event_id": "3"}
    with pytest.raises(RequestError, match=r"parameter 'cut_after' given more than once \('1' and '2'\); give it once"):
        split_query("cut_after=1&cut_after=2")
    spec, cut = spec_from_query("tokens=30&scenario=drop-newest&buffer=8&cut_after=5")
    assert (spec.tokens, spec.policy.value, spec.capacity, cut) == (30, "drop-newest", 8, 5)
    assert spec_from_query("tokens=30")[1] is None            # the report's default cut is not a live cut
    with pytest.raises(RequestError, match="last_event_id applies to /streams/<id>/events"):
        spec_from_query("last_event_id=3")


@pytest.mark.parametrize(("header", "query", "expected"), [
    (None, None, -1), ("", None, -1), (None, "", -1), ("0", None, 0), ("12", "3", 12), (None, "3", 3),
])
def test_resume_cursor_accepts(header: str | None, query: str | None, expected: int) -> None:
    assert resume_cursor(header, query, total=30, generated=30) == expected


@pytest.mark.parametrize(("header", "message"), [
    ("01", "Last-Event-ID must be a decimal integer without sign or leading zeros (at most 9 digits), got '01'"),
    ("30", "Last-Event-ID '30' is past the end: this stream has ids 0..29"),
    ("20", "Last-Event-ID '20' was never sent: this stream has generated ids 0..19 so far"),
])
def test_resume_cursor_refuses(header: str, message: str) -> None:
    with pytest.raises(RequestError) as error:
        resume_cursor(header, None, total=30, generated=20)
    assert error.value.status == 400 and error.value.message == message
