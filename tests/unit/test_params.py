"""The report's parameters: defaults, bounds, exact error messages, query and CLI agreeing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwire.report.params import (
    DEFAULTS,
    MAX_QUERY_CHARS,
    SCENARIOS,
    HelpRequested,
    ParamError,
    ReportParams,
    cli_usage,
    parse_cli,
    parse_query,
)

ALLOWED = "scenario, format, clock, tokens, buffer, reader_ms, producer_ms, cut_after, seed"
MS = "(like 3 or 0.5, at most 6 decimals)"


def test_defaults_are_the_seed_page() -> None:
    assert parse_query("") == DEFAULTS == ReportParams(
        scenario="disconnect", format="text", clock="virtual", tokens=70, buffer=4, reader_ms=3.0,
        producer_ms=0.5, cut_after=18, seed=1)


@pytest.mark.parametrize("query, changes", [
    ("scenario=baseline", {"scenario": "baseline"}),
    ("scenario=block", {"scenario": "block"}),
    ("scenario=drop", {"scenario": "drop-newest"}),
    ("scenario=drop-newest", {"scenario": "drop-newest"}),
    ("scenario=drop%2Doldest", {"scenario": "drop-oldest"}),
    ("format=json&clock=real", {"format": "json", "clock": "real"}),
    ("format=html", {"format": "html"}),
    ("tokens=2", {"tokens": 2, "cut_after": 1}),
    ("tokens=18", {"tokens": 18, "cut_after": 9}),
    ("tokens=19", {"tokens": 19, "cut_after": 18}),
    ("tokens=277&cut_after=276", {"tokens": 277, "cut_after": 276}),
    ("buffer=1", {"buffer": 1}),
    ("buffer=64", {"buffer": 64}),
    ("reader_ms=0", {"reader_ms": 0.0}),
    ("reader_ms=100", {"reader_ms": 100.0}),
    ("reader_ms=.5", {"reader_ms": 0.5}),
    ("reader_ms=2.", {"reader_ms": 2.0}),
    ("producer_ms=0.01", {"producer_ms": 0.01}),
    ("producer_ms=0%2E25", {"producer_ms": 0.25}),
    ("seed=0", {"seed": 0}),
    ("seed=4294967295", {"seed": 4294967295}),
    ("&&tokens=30&", {"tokens": 30}),
])
def test_valid_queries(query: str, changes: dict[str, object]) -> None:
    expected = {**{f: getattr(DEFAULTS, f) for f in ReportParams.__dataclass_fields__}, **changes}
    assert parse_query(query) == ReportParams(**expected)  # type: ignore[arg-type]


@pytest.mark.parametrize("query, message", [
    ("foo=1", f"unknown parameter 'foo' (given '1'); allowed: {ALLOWED}"),
    ("Tokens=5", f"unknown parameter 'Tokens' (given '5'); allowed: {ALLOWED}"),
    ("=5", f"unknown parameter '' (given '5'); allowed: {ALLOWED}"),
    ("scenario=nope", "scenario must be one of baseline, block, drop-newest (or drop), drop-oldest, disconnect; "
                      "got 'nope'"),
    ("scenario=", "scenario must be one of baseline, block, drop-newest (or drop), drop-oldest, disconnect; got ''"),
    ("format=xml", "format must be one of text, json, html; got 'xml'"),
    ("clock=wall", "clock must be one of virtual, real; got 'wall'"),
    ("tokens=abc", "tokens must be a whole number from 1 to 277; got 'abc'"),
    ("tokens=0", "tokens must be a whole number from 1 to 277; got '0'"),
    ("tokens=278", "tokens must be a whole number from 1 to 277; got '278'"),
    ("tokens=-5", "tokens must be a whole number from 1 to 277; got '-5'"),
    ("tokens=5.0", "tokens must be a whole number from 1 to 277; got '5.0'"),
    ("tokens=+5", "tokens must be a whole number from 1 to 277; got ' 5'"),   # '+' is a space in a query
    ("tokens=", "tokens must be a whole number from 1 to 277; got ''"),
    ("buffer=0", "buffer must be a whole number from 1 to 64; got '0'"),
    ("buffer=65", "buffer must be a whole number from 1 to 64; got '65'"),
    ("reader_ms=nan", f"reader_ms must be a number of milliseconds from 0 to 100 {MS}; got 'nan'"),
    ("reader_ms=NaN", f"reader_ms must be a number of milliseconds from 0 to 100 {MS}; got 'NaN'"),
    ("reader_ms=inf", f"reader_ms must be a number of milliseconds from 0 to 100 {MS}; got 'inf'"),
    ("reader_ms=1e1", f"reader_ms must be a number of milliseconds from 0 to 100 {MS}; got '1e1'"),
    ("reader_ms=3_0", f"reader_ms must be a number of milliseconds from 0 to 100 {MS}; got '3_0'"),
    ("reader_ms=-1", f"reader_ms must be a number of milliseconds from 0 to 100 {MS}; got '-1'"),
    ("reader_ms=100.5", f"reader_ms must be a number of milliseconds from 0 to 100 {MS}; got '100.5'"),
    ("reader_ms=0.1234567", f"reader_ms must be a number of milliseconds from 0 to 100 {MS}; got '0.1234567'"),
    ("producer_ms=0", f"producer_ms must be a number of milliseconds from 0.01 to 100 {MS}; got '0'"),
    ("producer_ms=0.009", f"producer_ms must be a number of milliseconds from 0.01 to 100 {MS}; got '0.009'"),
    ("cut_after=70", "cut_after must be a whole number from 0 to tokens-1 (69); got '70'"),
    ("tokens=10&cut_after=18", "cut_after must be a whole number from 0 to tokens-1 (9); got '18'"),
    ("seed=4294967296", "seed must be a whole number from 0 to 4294967295; got '4294967296'"),
    ("seed=x" + "y" * 60, "seed must be a whole number from 0 to 4294967295; got '" + "x" + "y" * 39 + "...'"),
    ("tokens=5&tokens=6", "parameter 'tokens' given more than once ('5' and '6'); give it once"),
    ("scenario=block&scenario=block", "parameter 'scenario' given more than once ('block' and 'block'); give it once"),
    ("tokens", "parameter 'tokens' has no value; write it as tokens=VALUE"),
    ("verbose", f"unknown parameter 'verbose' (given ''); allowed: {ALLOWED}"),
    ("x" * (MAX_QUERY_CHARS + 1), f"query string is {MAX_QUERY_CHARS + 1} characters; at most {MAX_QUERY_CHARS} "
                                  "are accepted"),
])
def test_bad_queries_give_one_exact_line(query: str, message: str) -> None:
    with pytest.raises(ParamError) as caught:
        parse_query(query)
    assert str(caught.value) == message
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_query_round_trip_leaves_defaults_out() -> None:
    assert DEFAULTS.query() == ""
    assert DEFAULTS.query(scenario="block", format="html") == "scenario=block&format=html"
    short = parse_query("tokens=10")
    assert short.query() == "tokens=10"                  # its cut_after is the default for 10 tokens
    assert short.query(tokens=70) == "cut_after=5"       # ...which is no longer the default for 70


def test_policy_and_capacity_name_the_core_fields() -> None:
    assert parse_query("scenario=baseline&buffer=9").policy == "block"
    assert parse_query("scenario=drop").policy == "drop-newest"
    assert parse_query("buffer=9").capacity == 9


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ParamError, match="tokens must be a whole number from 1 to 277; got '500'"):
        ReportParams(tokens=500)
    with pytest.raises(ParamError, match="not a canonical ReportParams"):
        ReportParams(scenario="drop")


@st.composite
def report_params(draw: st.DrawFn) -> ReportParams:
    tokens = draw(st.integers(2, 277))
    return ReportParams(
        scenario=draw(st.sampled_from(SCENARIOS)), format=draw(st.sampled_from(("text", "json", "html"))),
        clock=draw(st.sampled_from(("virtual", "real"))), tokens=tokens, buffer=draw(st.integers(1, 64)),
        reader_ms=draw(st.integers(0, 100_000)) / 1000, producer_ms=draw(st.integers(10, 100_000)) / 1000,
        cut_after=draw(st.integers(1, tokens - 1)), seed=draw(st.integers(0, 2**32 - 1)))


@given(report_params())
def test_any_valid_params_survive_their_own_query(params: ReportParams) -> None:
    assert parse_query(params.query()) == params


@settings(max_examples=300)
@given(st.text(max_size=80))
def test_any_query_is_params_or_one_line_param_error(query: str) -> None:
    try:
        parse_query(query)
    except ParamError as exc:
        assert str(exc) and "\n" not in str(exc)


@settings(max_examples=100)
@given(st.dictionaries(st.sampled_from(list(ReportParams.__dataclass_fields__)), st.text(max_size=12), max_size=5))
def test_query_and_cli_agree(values: dict[str, str]) -> None:
    query = "&".join(f"{k}={v}" for k, v in values.items() if "&" not in v and "%" not in v and "+" not in v)
    argv = [f"--{k.replace('_', '-')}={v}" for k, v in values.items() if "&" not in v and "%" not in v
            and "+" not in v]
    outcomes = []
    for parse, arg in ((parse_query, query), (parse_cli, argv)):
        try:
            outcomes.append(parse(arg))  # type: ignore[operator]
        except ParamError as exc:
            outcomes.append(str(exc))
    assert _as_flags(outcomes[0]) == outcomes[1]


def _as_flags(outcome: object) -> object:
    """A query's error message as the command words it: the parameter named as its flag."""
    if not isinstance(outcome, str):
        return outcome
    for name in ReportParams.__dataclass_fields__:
        flag = "--" + name.replace("_", "-")
        if outcome.startswith(f"{name} must"):
            return flag + outcome[len(name):]
        if outcome.startswith(f"parameter {name!r} given"):
            return f"flag {flag}" + outcome[len(f"parameter {name!r}"):]
    return outcome


def test_cli_flags_take_both_spellings_and_both_forms() -> None:
    expected = parse_query("reader_ms=5&cut_after=3&scenario=block")
    assert parse_cli(["--reader-ms", "5", "--cut-after=3", "--scenario", "block"]) == expected
    assert parse_cli(["--reader_ms=5", "--cut_after", "3", "--scenario=block"]) == expected
    assert parse_cli([]) == DEFAULTS


@pytest.mark.parametrize("argv, message", [
    (["--nope", "1"], "unknown flag '--nope'; allowed: --scenario, --format, --clock, --tokens, --buffer, "
                      "--reader-ms, --producer-ms, --cut-after, --seed"),
    (["--tokens"], "flag --tokens needs a value"),
    (["block"], "unexpected argument 'block'; flags look like --tokens 70 (see --help)"),
    (["--"], "unexpected argument '--'; flags look like --tokens 70 (see --help)"),
    (["--tokens", "5", "--tokens=6"], "flag --tokens given more than once ('5' and '6'); give it once"),
    (["--cut-after", "70"], "--cut-after must be a whole number from 0 to tokens-1 (69); got '70'"),
    (["--reader-ms", "nan"], f"--reader-ms must be a number of milliseconds from 0 to 100 {MS}; got 'nan'"),
])
def test_bad_cli_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ParamError) as caught:
        parse_cli(argv)
    assert str(caught.value) == message


def test_help() -> None:
    with pytest.raises(HelpRequested):
        parse_cli(["--tokens", "5", "--help"])
    usage = cli_usage()
    for name in ("--scenario", "--format", "--clock", "--tokens", "--buffer", "--reader-ms", "--producer-ms",
                 "--cut-after", "--seed"):
        assert name in usage
