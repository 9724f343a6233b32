"""A proxied answer always ends, and says why: ``TokenStreams(Upstream(...))`` (what ``tokenwire proxy`` serves) in
front of an upstream that misbehaves (``support.misbehaving_upstream``), read with the openai SDK.

- content without a ``finish_reason``, forever: ``failed`` at ``max_answer_tokens`` (``UpstreamTooLong``), or at
  ``max_answer_s`` (``UpstreamOvertime``), whichever runs out first, and the upstream's request is closed;
- ``: ping`` comments alone, forever: ``failed`` (``UpstreamStalled``) after ``read_timeout_s``: a comment is no data;
- a ``302`` or a ``200 text/html``: a failure whose logged cause names the status or the content type;
- the command's flags set the bounds, each refused by name, and its log lines are its own (``tokenwire proxy:``):
  an upstream's failure is one line naming its kind and cause, with no traceback.

The proxy runs in this process (uvicorn in a thread), so its log lines are caught; the command runs as typed.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Iterator

import openai
import pytest
from support.asgi_thread import in_thread
from support.misbehaving_upstream import MisbehavingUpstream
from support.requirements import ROOT

from tokenwire.asgi import TokenStreams
from tokenwire.upstream import Upstream, UpstreamConfig

# A bound small enough to reach at once against an upstream sending a token each 5 ms.
TOKENS = 40
COMMAND_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def upstream() -> Iterator[MisbehavingUpstream]:
    with MisbehavingUpstream() as one:
        yield one


def ask(base: str, model: str) -> tuple[str, str]:
    """A streamed chat completion of ``model`` through the proxy at ``base``: its text and the failure it ended with."""
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=30)
    text: list[str] = []
    with pytest.raises(openai.APIError) as raised:
        for chunk in client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}],
                                                    stream=True):
            text.extend(choice.delta.content or "" for choice in chunk.choices)
    return "".join(text), raised.value.message


def relay(upstream: MisbehavingUpstream, model: str, **bounds: float) -> tuple[str, str]:
    config = UpstreamConfig(upstream.url, **bounds)  # type: ignore[arg-type]
    with in_thread(TokenStreams(Upstream(config))) as base:
        return ask(base, model)


def logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(record.getMessage() for record in caplog.records)


def test_an_answer_that_never_ends_fails_at_its_token_bound(upstream: MisbehavingUpstream,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    text, failure = relay(upstream, "endless", max_answer_tokens=TOKENS)
    assert (text, failure) == ("".join(f" e{i}" for i in range(TOKENS)), "the model raised UpstreamTooLong")
    assert upstream.served[-1].left.wait(10), "the upstream's request was not closed"
    assert f"UpstreamTooLong: the upstream at {upstream.url}/chat/completions went on past max_answer_tokens " \
           f"({TOKENS} tokens) without ending" in logged(caplog)


def test_an_answer_that_never_ends_fails_at_its_time_bound(upstream: MisbehavingUpstream,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    text, failure = relay(upstream, "endless", max_answer_s=0.3)
    assert failure == "the model raised UpstreamOvertime"
    assert text == "".join(f" e{i}" for i in range(text.count(" e")))       # what came before it, whole
    assert upstream.served[-1].left.wait(10), "the upstream's request was not closed"
    assert "went on past max_answer_s (0.3 s) without ending" in logged(caplog)


def test_comments_alone_are_a_stall(upstream: MisbehavingUpstream, caplog: pytest.LogCaptureFixture) -> None:
    text, failure = relay(upstream, "pings", read_timeout_s=0.3)
    assert (text, failure) == ("", "the model raised UpstreamStalled")
    served = upstream.served[-1]
    assert served.left.wait(10) and served.sent_when_left is not None and served.sent_when_left > 0
    assert f"the upstream at {upstream.url}/chat/completions sent no data for 0.3 s" in logged(caplog)


@pytest.mark.parametrize(("model", "kind", "cause"), [
    ("redirect", "UpstreamStatus", "answered 302 Found, to 'http://elsewhere.invalid/v1/chat/completions', not 200 "
                                   "with an event stream"),
    ("html", "UpstreamMalformed", "answered 200 with content type 'text/html; charset=utf-8', not "
                                  "text/event-stream: '<!doctype html><html><body><form action=/login>"),
])
def test_an_answer_that_is_no_event_stream_names_its_status_or_type(upstream: MisbehavingUpstream, model: str,
                                                                   kind: str, cause: str,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    assert relay(upstream, model) == ("", f"the model raised {kind}")
    said = logged(caplog)
    assert f"{kind}: the upstream at {upstream.url}/chat/completions {cause}" in said
    assert "before the answer's end" not in said


def test_an_upstream_failure_is_one_log_line_without_a_traceback(upstream: MisbehavingUpstream,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """An upstream that fails is the operator's news, not a bug of the proxy: one line, its kind and its cause."""
    assert relay(upstream, "redirect") == ("", "the model raised UpstreamStatus")
    lines = [record for record in caplog.records if "the model raised" in record.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None, [record.getMessage() for record in lines]
    said = lines[0].getMessage()
    assert "\n" not in said and "Traceback" not in said
    assert said.endswith(f": the model raised UpstreamStatus: the upstream at {upstream.url}/chat/completions "
                         f"answered 302 Found, to 'http://elsewhere.invalid/v1/chat/completions', not 200 with an "
                         f"event stream"), said


def test_a_model_list_the_upstream_never_sends_is_a_stall() -> None:
    """An upstream that takes the connection and never answers ``GET /models`` is named stalled, not refused."""
    import asyncio
    import socket

    from tokenwire.upstream import UpstreamStalled
    with socket.socket() as silent:                  # listens, never accepts: the kernel completes the connect
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"

        async def listed() -> None:
            upstream = Upstream(UpstreamConfig(url, read_timeout_s=0.3))
            try:
                await upstream.model_ids()
            finally:
                await upstream.aclose()
        with pytest.raises(UpstreamStalled) as stalled:
            asyncio.run(listed())
    assert str(stalled.value) == f"the upstream at {url}/models did not answer within 0.3 s"


def test_the_bounds_have_stated_defaults_and_are_refused_by_name() -> None:
    config = UpstreamConfig("http://127.0.0.1:1/v1")
    assert (config.max_answer_tokens, config.max_answer_s) == (32_768, 1800.0)
    with pytest.raises(ValueError) as tokens:
        UpstreamConfig("http://127.0.0.1:1/v1", max_answer_tokens=0)
    assert str(tokens.value) == "max_answer_tokens must be an int from 1 to 100000 (the most a stream keeps), got 0"
    with pytest.raises(ValueError) as seconds:
        UpstreamConfig("http://127.0.0.1:1/v1", max_answer_s=-1.0)
    assert str(seconds.value) == "max_answer_s must be a number of seconds from 0 to 86400, got -1.0"


def proxy(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokenwire", "proxy", *argv], capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S, cwd=ROOT)


def test_the_flags_are_refused_by_name() -> None:
    done = proxy("--upstream", "http://127.0.0.1:1/v1", "--max-answer-tokens", "0")
    assert (done.returncode, done.stderr) == (2, "tokenwire proxy: --max-answer-tokens must be an int from 1 to "
                                                 "100000 (the most a stream keeps); got '0'\n")
    done = proxy("--upstream", "http://127.0.0.1:1/v1", "--max-answer-s", "0")
    assert (done.returncode, done.stderr) == (2, "tokenwire proxy: --max-answer-s must be a number of seconds from 0 "
                                                 "to 86400; got '0'\n")
    done = proxy("--upstream", "http://127.0.0.1:1/v1", "--upstream-timeout-s", "0")
    assert (done.returncode, done.stderr) == (2, "tokenwire proxy: --upstream-timeout-s must be a number of seconds "
                                                 "from 0 to 3600; got '0'\n")
    done = proxy("--upstream", "http://127.0.0.1:1/v1", "--request-timeout-s", "0")
    assert (done.returncode, done.stderr) == (2, "tokenwire proxy: --request-timeout-s must be a number of seconds "
                                                 "above 0 and below a day; got '0'\n")
    helped = proxy("--help").stdout
    assert "--request-timeout-s" in helped
    assert "(UpstreamTooLong; default 32768)" in helped and "(UpstreamOvertime; default 1800)" in helped


def test_the_command_bounds_an_answer_and_logs_as_itself(upstream: MisbehavingUpstream) -> None:
    """``tokenwire proxy --max-answer-tokens``: the endless answer fails at it; its lines say ``tokenwire proxy:``."""
    command = subprocess.Popen([sys.executable, "-m", "tokenwire", "proxy", "--upstream", upstream.url, "--port", "0",
                                "--max-answer-tokens", str(TOKENS), "--quiet"], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    banner: list[str] = []
    reading = threading.Thread(target=lambda: banner.append(command.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reading.start()
    reading.join(COMMAND_TIMEOUT_S)
    try:
        assert banner and "serving on http://127.0.0.1:" in banner[0], banner
        base = banner[0].split(" ")[4].rstrip("/")
        assert ask(base, "endless") == ("".join(f" e{i}" for i in range(TOKENS)), "the model raised UpstreamTooLong")
    finally:
        command.terminate()
        _, said = command.communicate(timeout=COMMAND_TIMEOUT_S)
    lines = [line for line in said.splitlines() if "UpstreamTooLong" in line and "the model raised" in line]
    assert lines and all(line.startswith("tokenwire proxy: tokenwire stream ") for line in lines), said
    assert "tokenwire serve:" not in said


def test_a_proxy_log_line_is_its_own(caplog: pytest.LogCaptureFixture) -> None:
    """The formatter ``tokenwire proxy`` installs names the proxy (``serve``'s names serve)."""
    from tokenwire.live.command import configure_logging

    root = logging.getLogger("tokenwire")
    saved = (root.handlers[:], root.propagate, root.level)
    try:
        configure_logging(False, "proxy")
        formatted = root.handlers[0].format(logging.LogRecord("tokenwire.asgi", logging.ERROR, "", 0, "it broke",
                                                              None, None))
        assert formatted == "tokenwire proxy: it broke"
    finally:
        root.handlers[:], root.propagate = saved[0], saved[1]
        root.setLevel(saved[2])
