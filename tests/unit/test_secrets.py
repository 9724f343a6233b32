"""A log URL's password is hidden wherever it is shown: ``redact_url`` and ``scrub`` themselves, the command line's
refusal of a bad or malformed log URL, and the hosted function's refusal of a setting it cannot use.  (What each
server says as a process, on a Redis with a password: ``redis/test_redis_password_outputs.py``.)"""

from __future__ import annotations

import pytest

from tokenwire.asgi.hosted import hosted_app, missing_log
from tokenwire.redislog.redact import redact_url, scrub

PASSWORD = "S3cr3t-pw"


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://default:S3cr3t-pw@127.0.0.1:6379/0", "redis://default:***@127.0.0.1:6379/0"),
    ("rediss://:S3cr3t-pw@cache.internal:6380/2?lease_ms=5", "rediss://:***@cache.internal:6380/2?lease_ms=5"),
    ("redis://S3cr3t-pw@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
    ("redis://127.0.0.1:6379/0?password=S3cr3t-pw&db=1", "redis://127.0.0.1:6379/0?password=***&db=1"),
    ("unix://:S3cr3t-pw@/run/redis.sock?db=0", "unix://:***@/run/redis.sock?db=0"),
    ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("redis://default:pa/ss?x@127.0.0.1:6379/0", "redis://default:***@127.0.0.1:6379/0"),   # unencoded: all of it
    ("S3cr3t-pw@cache.internal:6379", "***@cache.internal:6379"),                          # no scheme
])
def test_redact_url_keeps_the_host_and_hides_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_scrub_takes_the_password_out_of_any_text_as_written_or_quoted() -> None:
    url = "redis://default:p%40ss@h:1/0"
    assert scrub("auth p@ss failed, p%40ss too", url) == "auth *** failed, *** too"
    assert scrub("nothing to hide", "redis://h:1/0") == "nothing to hide"


@pytest.mark.parametrize("url", ["S3cr3t-pw@cache.internal:6379", "default:S3cr3t-pw@cache.internal:6379",
                                 "cache.internal:6379", "http://default:S3cr3t-pw@cache.internal:6379/0"])
def test_the_hosted_refusal_of_a_wrong_setting_quotes_no_more_than_a_scheme(url: str) -> None:
    said = missing_log(url)
    assert said is not None and PASSWORD not in said and "cache.internal" not in said
    assert said.endswith("must be a redis://, rediss://, redis+sentinel:// or rediss+sentinel:// URL, " +
                         ("got one starting 'http'" if url.startswith("http") else "got something else"))


def test_a_bad_log_url_is_refused_with_the_password_hidden(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenwire.cli import main
    assert main(["serve", "--log", "http://default:S3cr3t-pw@127.0.0.1:1/0"]) == 2
    err = capsys.readouterr().err
    assert err == ("tokenwire serve: --log must be 'memory' or a redis://, rediss://, unix://, redis+sentinel:// or "
                   "rediss+sentinel:// URL; got 'http://default:***@127.0.0.1:1/0'\n")


@pytest.mark.parametrize(("url", "said"), [
    ("redis://default:S3cr3t-pw@127.0.0.1:notaport/0",
     "log URL 'redis://default:***@127.0.0.1:notaport/0' is malformed: Port could not be cast to integer value "
     "as 'notaport'"),
    ("redis://default:S3cr3t-pw@127.0.0.1:99999/0",
     "log URL 'redis://default:***@127.0.0.1:99999/0' is malformed: Port out of range 0-65535"),
    ("redis://default:S3cr3t-pw@[::1/0", "log URL 'redis://default:***@[::1/0' is malformed: Invalid IPv6 URL"),
    ("redis://127.0.0.1:1/0?password=S3cr3t-pw&socket_timeout=abc",
     "log URL 'redis://127.0.0.1:1/0?password=***&socket_timeout=abc' is malformed: "
     "Invalid value for 'socket_timeout' in connection URL."),
    ("redis://default:S3cr3t-pw@127.0.0.1:1/cache",     # redis-py would quietly use database 0
     "log URL 'redis://default:***@127.0.0.1:1/cache' names database 'cache'; a database is a number (/0)"),
])
def test_a_malformed_log_url_is_one_line_not_a_traceback(url: str, said: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from tokenwire.cli import main
    assert main(["serve", "--port", "0", "--log", url]) == 2
    assert capsys.readouterr() == ("", f"tokenwire serve: {said}\n")


@pytest.mark.parametrize(("url", "max_duration"), [("redis://default:S3cr3t-pw@cache.internal:notaport/0", None),
                                                   ("redis://default:S3cr3t-pw@cache.internal:1/0", "soon")])
def test_the_hosted_app_with_a_setting_it_cannot_use_answers_503_and_logs_why(
        url: str, max_duration: str | None, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # It raised at import (the function crashed on every request), with the log URL's host in the traceback.
    if max_duration is not None:
        monkeypatch.setenv("TOKENWIRE_MAX_DURATION_S", max_duration)
    app = hosted_app({"TOKENWIRE_LOG_URL": url})
    assert app.streams is None and app.unavailable == (
        "the live page cannot start with its settings (TOKENWIRE_LOG_URL, TOKENWIRE_MAX_DURATION_S): the "
        "function's log says which is wrong")
    assert "tokenwire live: " in caplog.text and PASSWORD not in caplog.text


def test_redact_url_of_an_unclosed_ipv6_host_still_hides_the_password() -> None:
    assert redact_url("redis://[::1/0?password=S3cr3t-pw") == "redis://[::1/0?password=***"
    assert redact_url("redis://default:S3cr3t-pw@[::1/0") == "redis://default:***@[::1/0"
