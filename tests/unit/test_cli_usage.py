"""One style of usage error for ``report``, ``serve`` and ``demo``: one line on stderr naming the flag, exit 2.

No usage block, no traceback, nothing on stdout; the line names the flag (and the value when it is the value
that is wrong) and what is expected.  Checked through ``tokenwire.cli.main`` and each command's own entry point in
this process; as a user types it, in a fresh interpreter: ``processes/test_cli_as_typed.py``.
"""

from __future__ import annotations

import pytest

from tokenwire.cli import main

CASES = [
    # (argv, the one line on stderr)
    (["report", "--bogus", "1"], "tokenwire report: unknown flag '--bogus'; allowed: --scenario, --format, --clock, "
                                 "--tokens, --buffer, --reader-ms, --producer-ms, --cut-after, --seed"),
    (["report", "--tokens", "abc"], "tokenwire report: --tokens must be a whole number from 1 to 277; got 'abc'"),
    (["serve", "--bogus", "1"], "tokenwire serve: unknown flag '--bogus'; allowed: --host, --port, --heartbeat-s, "
                                "--write-timeout-s, --request-timeout-s, --max-live, --max-connections, "
                                "--max-streams, --max-age-s, --create-burst, --create-rate, --grace-s, "
                                "--max-duration-s, --max-body-bytes, --max-chat-body-bytes, --quiet, --no-metrics, "
                                "--log"),
    (["serve", "--max-body-bytes", "-1"], "tokenwire serve: --max-body-bytes must be a non-negative int; got '-1'"),
    (["serve", "--bogus=1"], None),
    (["serve", "--port", "abc"], "tokenwire serve: --port must be a whole number; got 'abc'"),
    (["serve", "--grace-s", "soon"], "tokenwire serve: --grace-s must be a number; got 'soon'"),
    (["serve", "--port"], "tokenwire serve: flag --port needs a value"),
    (["serve", "extra"], "tokenwire serve: unexpected argument 'extra'; flags look like --name value (see --help)"),
    (["serve", "--port", "70000"], "tokenwire serve: --port must be from 0 to 65535; got '70000'"),
    # a number out of range is quoted as typed (not as the float it became: "-1.0"), with the flag named
    (["serve", "--grace-s", "-1"], "tokenwire serve: --grace-s must be a number of seconds from 0 to 3600; got '-1'"),
    (["serve", "--grace-s=5e3"], "tokenwire serve: --grace-s must be a number of seconds from 0 to 3600; got '5e3'"),
    (["serve", "--heartbeat-s", "0"],
     "tokenwire serve: --heartbeat-s must be a number of seconds above 0 and below a day; got '0'"),
    (["serve", "--max-live", "0"], "tokenwire serve: --max-live must be a positive int; got '0'"),
    (["serve", "--max-age-s", "0"], "tokenwire serve: --max-age-s must be from 1 to 31536000 seconds; got '0'"),
    (["serve", "--create-rate", "-0.5"],
     "tokenwire serve: --create-rate must be a positive number of streams per second; got '-0.5'"),
    (["serve", "--max-connections", "0"],
     "tokenwire serve: --max-connections must be an int from 1 to 1000000; got '0'"),
    (["serve", "--max-duration-s", "-5"],
     "tokenwire serve: --max-duration-s must be a number of seconds above 0 and below a day; got '-5'"),
    (["serve", "--log", "mysql://x"],
     "tokenwire serve: --log must be 'memory' or a redis://, rediss://, unix://, redis+sentinel:// or "
     "rediss+sentinel:// URL; got 'mysql://x'"),
    (["demo", "--bogus"], "tokenwire demo: unknown flag '--bogus'; allowed: --format, --reader-ms, --buffer, "
                          "--cut-after, --sndbuf, --rcvbuf, --quiet"),
    (["demo", "--format", "xml"], "tokenwire demo: --format must be one of text, json; got 'xml'"),
    (["demo", "--buffer", "many"], "tokenwire demo: --buffer must be a whole number; got 'many'"),
    (["demo", "--buffer", "65"], "tokenwire demo: --buffer must be from 1 to 64; got '65'"),
    (["demo", "--reader-ms", "1000"], "tokenwire demo: --reader-ms must be from 0 to 100; got '1000'"),
    (["demo", "--reader-ms=-1"], "tokenwire demo: --reader-ms must be from 0 to 100; got '-1'"),
    (["demo", "--cut-after", "0999"],
     "tokenwire demo: --cut-after must be a whole number from 0 to tokens-1 (276); got '0999'"),
    (["demo", "--sndbuf", "-1"],
     "tokenwire demo: --sndbuf must be 0 (the kernel's) or a number of bytes up to 2147483647; got '-1'"),
    (["report", "--scenario", "dropped"], "tokenwire report: --scenario must be one of baseline, block, "
                                          "drop-newest (or drop), drop-oldest, disconnect; got 'dropped'"),
    (["report", "--reader-ms", "1000"], "tokenwire report: --reader-ms must be a number of milliseconds from 0 to "
                                        "100 (like 3 or 0.5, at most 6 decimals); got '1000'"),
    # An unknown flag is named before a missing required argument (argparse's own order says the latter).
    (["proxy", "--bogus=1"], "tokenwire proxy: unknown flag '--bogus'; allowed: --upstream, --model, --api-key-env, "
                             "--takeover, --continue-final-message, --connect-timeout-s, --upstream-timeout-s, "
                             "--max-answer-tokens, --max-answer-s, "
                             "--host, --port, --heartbeat-s, --write-timeout-s, --request-timeout-s, --max-live, "
                             "--max-connections, --max-streams, --create-burst, --create-rate, --grace-s, "
                             "--max-duration-s, "
                             "--max-body-bytes, --max-chat-body-bytes, --quiet, --log"),
    (["read", "--bogus"], "tokenwire read: unknown flag '--bogus'; allowed: --header, --last-event-id, "
                          "--max-attempts"),
]


@pytest.mark.parametrize(("argv", "line"), CASES, ids=[" ".join(argv) for argv, _ in CASES])
def test_a_bad_flag_or_value_is_one_line_and_exit_2(argv: list[str], line: str | None,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1 and err.endswith("\n"), err
    assert err.startswith(f"tokenwire {argv[0]}: ") and "usage:" not in err and "error:" not in err
    assert argv[1].partition("=")[0] in err                # the flag (or the stray argument) is named
    if line is not None:
        assert err == line + "\n"


def test_report_help_puts_each_alias_beside_its_own_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--help"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.lstrip().startswith("--scenario"))
    assert line == ("  --scenario     baseline, block, drop-newest (or drop), drop-oldest, disconnect  "
                    "[default disconnect]")


@pytest.mark.parametrize(("argv", "typed"), [(["--port", "1", "--port", "70000"], "'70000'"),
                                             (["--port=9", "--port=070000"], "'070000'")])
def test_the_value_quoted_is_the_one_argparse_kept(argv: list[str], typed: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", *argv]) == 2
    assert capsys.readouterr().err == f"tokenwire serve: --port must be from 0 to 65535; got {typed}\n"


def test_tokenwire_serve_refuses_bad_flags() -> None:
    from tokenwire.live.command import cli_main
    assert cli_main(["--port", "70000"]) == 2
    assert cli_main(["--heartbeat-s", "0"]) == 2


CLI_CASES = [
    (["report", "--tokens", "nan"], "tokens", "'nan'"),
    (["report", "--buffer", "-1"], "buffer", "'-1'"),
    (["report", "--reader-ms", "inf"], "--reader-ms", "'inf'"),
    (["report", "--seed", "9" * 3000], "seed", "'9999"),
    (["report", "--scenario", "\u00e9"], "scenario", "'\u00e9'"),
    (["report", "--tokens", "5", "--tokens", "6"], "tokens", "'6'"),
    (["report", "--bogus", "1"], "--bogus", "allowed"),
    (["report", "--tokens"], "--tokens", "needs a value"),
    (["serve", "--max-live", "0"], "--max-live", "got '0'"),
    (["serve", "--max-streams", "-3"], "--max-streams", "got '-3'"),
    (["serve", "--max-age-s", "0"], "--max-age-s", "got '0'"),
    (["serve", "--heartbeat-s", "nan"], "--heartbeat-s", "got 'nan'"),
    (["serve", "--write-timeout-s", "inf"], "--write-timeout-s", "got 'inf'"),
    (["serve", "--request-timeout-s", "0"], "--request-timeout-s", "got '0'"),
    (["serve", "--port", "70000"], "--port", "got '70000'"),
    (["serve", "--port", "abc"], "--port", "'abc'"),
    (["serve", "--log", "ftp://x"], "log", "'ftp://x'"),
    (["demo", "--buffer", "0"], "--buffer", "got '0'"),
    (["demo", "--rcvbuf", "9" * 25], "--rcvbuf", "got '9999"),
]


@pytest.mark.parametrize(("argv", "names", "quotes"), CLI_CASES, ids=[" ".join(c[0])[:40] for c in CLI_CASES])
def test_every_bad_flag_exits_2_with_a_line_naming_it(argv: list[str], names: str, quotes: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    try:
        status = main(argv)
    except SystemExit as exit_:                 # argparse's own errors
        status = exit_.code                     # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    last = err.strip().splitlines()[-1]
    assert names in last and quotes in last, last
    assert "Traceback" not in err and len(last) < 400


def test_bad_flags_exit_2_with_one_line() -> None:
    """``tokenwire demo``'s own entry point refuses a cut past the answer, a negative one, a buffer past 64."""
    from tokenwire.demo import cli_main
    assert cli_main(["--cut-after", "277"]) == 2 and cli_main(["--cut-after", "-1"]) == 2
    assert cli_main(["--buffer", "65"]) == 2
