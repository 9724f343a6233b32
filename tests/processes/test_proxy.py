"""``tokenwire proxy`` in front of a local OpenAI-compatible stand-in (``support.apps.upstream_standin``), read
with the real SDK.

The proxy is a real process (``python -m tokenwire proxy --port 0``), the
stand-in a real uvicorn; the SDK, the relay and the sockets are real.  The
SDK's text is exactly the stand-in's; each way the upstream can fail is a
clear failure, never a hang; the API key reaches the upstream and no output;
and on one redis-server a proxy SIGKILLed mid-answer is continued by another
from the logged prefix, which the stand-in sees as the assistant's turn.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from support.asgi import ROOT, Uvicorn, uvicorn
from support.instances import BLOCK_MS, LEASE_MS
from support.live import token_text
from support.redis import RedisServer
from support.requirements import free_port

from tokenwire.upstream import Upstream, UpstreamConfig

START_TIMEOUT_S = 15.0


def text(n: int, start: int = 0) -> str:
    return "".join(f" u{i}" for i in range(start, n))


class Proxy:
    """One ``tokenwire proxy`` process; ``url`` is its OpenAI base URL."""

    def __init__(self, upstream: str, *flags: str, env: dict[str, str] | None = None) -> None:
        environ = {**os.environ, **(env or {})}
        environ.pop("TOKENWIRE_LOG_URL", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "proxy", "--upstream", upstream,
                                      "--port", "0", *flags], cwd=ROOT, env=environ, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        self.banner = box[0] if box else ""
        if "serving on http://127.0.0.1:" not in self.banner:
            self.stop(signal.SIGKILL)
            raise RuntimeError(f"the proxy did not start: {self.banner!r} {self.proc.stderr.read()!r}")
        self.url = self.banner.split(" ")[4].rstrip("/") + "/v1"

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url, api_key="unused", max_retries=0, timeout=30)

    def stop(self, sig: int = signal.SIGTERM) -> str:
        """Stop it; returns all it printed."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=15)
        return self.banner + out + err


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Uvicorn, Path]]:
    calls = tmp_path_factory.mktemp("standin") / "calls.jsonl"
    with uvicorn("support.apps.upstream_standin:app",
                 env={"STANDIN_CALLS": str(calls), "STANDIN_KEY": "sk-standin-7f3a"}) as app:
        yield app, calls


@pytest.fixture(scope="module")
def proxy(standin: tuple[Uvicorn, Path]) -> Iterator[Proxy]:
    one = Proxy(standin[0].url + "/v1", "--upstream-timeout-s", "2", "--quiet")
    yield one
    one.stop()


def test_the_sdks_text_is_the_upstreams(proxy: Proxy) -> None:
    client = proxy.client()
    chunks = list(client.chat.completions.create(model="n=20", messages=[{"role": "user", "content": "hi"}],
                                                 stream=True))
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == text(20)
    whole = client.chat.completions.create(model="n=7", messages=[{"role": "user", "content": "hi"}])
    assert whole.choices[0].message.content == text(7)
    response = client.responses.create(model="n=9", input="hi")
    assert (response.status, response.output_text) == ("completed", text(9))
    created = client.responses.create(model="n=15,delay_ms=10", input="hi", background=True, stream=True)
    first = []
    for event in created:
        first.append(event)
        if event.type == "response.output_text.delta" and event.delta == " u3":
            created.close()
            break
    rest = list(client.responses.retrieve(first[0].response.id, stream=True,
                                          starting_after=first[-1].sequence_number))
    events = first + rest
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert "".join(event.delta for event in events if event.type == "response.output_text.delta") == text(15)


def test_the_request_reaches_the_upstream_as_messages(proxy: Proxy, standin: tuple[Uvicorn, Path]) -> None:
    calls = standin[1]
    before = len(calls.read_text().splitlines()) if calls.exists() else 0
    proxy.client().responses.create(model="n=2,tag=instructions", input="hello there", instructions="be brief",
                                    max_output_tokens=50)
    seen = [json.loads(line) for line in calls.read_text().splitlines()[before:]]
    assert seen[-1]["messages"] == [{"role": "system", "content": "be brief"},
                                    {"role": "user", "content": "hello there"}]
    assert (seen[-1]["max_tokens"], seen[-1]["continue_final_message"]) == (50, None)


@pytest.mark.parametrize(("fail", "kind"), [("status", "UpstreamStatus"), ("auth", "UpstreamStatus"),
                                            ("stall", "UpstreamStalled"), ("malformed", "UpstreamMalformed"),
                                            ("error_frame", "UpstreamFailed"), ("cut", "UpstreamBroken")])
def test_each_upstream_failure_is_a_clear_failure(proxy: Proxy, fail: str, kind: str) -> None:
    client = proxy.client()
    chunks = client.chat.completions.create(model=f"fail={fail},n=6", messages=[{"role": "user", "content": "x"}],
                                            stream=True)
    with pytest.raises(openai.APIError) as raised:
        list(chunks)
    assert raised.value.message == f"the model raised {kind}"
    response = client.responses.create(model=f"fail={fail},n=6", input="x")
    assert response.status == "failed" and response.error is not None
    assert response.error.message == f"the model raised {kind}"
    with pytest.raises(openai.InternalServerError) as whole:
        client.chat.completions.create(model=f"fail={fail},n=6", messages=[{"role": "user", "content": "x"}])
    assert whole.value.body == {"message": f"the model failed: the model raised {kind}", "type": "server_error",
                                "code": None}


def test_an_upstream_that_refuses_is_a_clear_failure() -> None:
    closed = Proxy(f"http://127.0.0.1:{free_port()}/v1", "--quiet")
    try:
        chunks = closed.client().chat.completions.create(model="any", messages=[{"role": "user", "content": "x"}],
                                                         stream=True)
        with pytest.raises(openai.APIError) as raised:
            list(chunks)
        assert raised.value.message == "the model raised UpstreamRefused"
    finally:
        closed.stop()


def test_an_upstream_urls_password_is_in_no_output_and_no_answer() -> None:
    """``--upstream http://user:pass@host/v1``: the banner, the error lines and the answers show it as ***."""
    port = free_port()
    keyed = Proxy(f"http://alice:s3cret@127.0.0.1:{port}/v1")
    answers: list[str] = []
    try:
        base, ask = keyed.url, {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        answers.append(httpx.post(base + "/chat/completions", json={**ask, "stream": True}, timeout=30).text)
        whole = httpx.post(base + "/chat/completions", json=ask, timeout=30)
        models = httpx.get(base + "/models", timeout=30)
        answers += [whole.text, models.text]
    finally:
        said = keyed.stop()
    assert keyed.banner.endswith(f" relaying http://alice:***@127.0.0.1:{port}/v1\n")
    assert (whole.status_code, models.status_code) == (500, 502)
    assert models.json()["error"]["message"] == "the model could not list its models (UpstreamRefused)"
    assert f"UpstreamRefused: cannot reach the upstream at http://alice:***@127.0.0.1:{port}/v1/chat/completions: " \
           in said
    assert f"cannot list the models of the upstream at http://alice:***@127.0.0.1:{port}/v1/models" in said
    assert all("s3cret" not in text for text in (said, *answers))


def test_an_upstream_urls_password_is_in_no_refusal_and_no_repr() -> None:
    done = subprocess.run([sys.executable, "-m", "tokenwire", "proxy", "--upstream", "ftp://alice:s3cret@h/v1"],
                          capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("tokenwire proxy: the upstream URL must start with http:// or https://, "
                           "got 'ftp://alice:***@h/v1'\n")
    config = UpstreamConfig("http://alice:s3cret@h/v1", model="m")
    assert repr(Upstream(config)) == (
        "Upstream(config=UpstreamConfig(url='http://alice:***@h/v1', model='m', api_key_env=None, "
        "continue_final_message=False, connect_timeout_s=5.0, read_timeout_s=60.0, max_connections=256, "
        "max_answer_tokens=32768, max_answer_s=1800.0))")
    assert config.endpoint == "http://alice:s3cret@h/v1/chat/completions"      # what is sent keeps it


def test_the_api_key_reaches_the_upstream_and_no_output(standin: tuple[Uvicorn, Path]) -> None:
    key = "sk-standin-7f3a"
    keyed = Proxy(standin[0].url + "/v1", "--api-key-env", "STANDIN_TOKEN", env={"STANDIN_TOKEN": key})
    try:
        whole = keyed.client().chat.completions.create(model="fail=auth,n=5",
                                                       messages=[{"role": "user", "content": "x"}])
        assert whole.choices[0].message.content == text(5)
        keyed.client().chat.completions.create(model="fail=status", messages=[{"role": "user", "content": "x"}],
                                               stream=True).close()
    finally:
        said = keyed.stop()
    assert "serving on" in said and key not in said


def test_a_missing_api_key_variable_is_refused_at_start(standin: tuple[Uvicorn, Path]) -> None:
    done = subprocess.run([sys.executable, "-m", "tokenwire", "proxy", "--upstream", standin[0].url + "/v1",
                           "--api-key-env", "TOKENWIRE_NO_SUCH_VARIABLE"], capture_output=True, text=True,
                          timeout=30, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr == ("tokenwire proxy: the environment variable 'TOKENWIRE_NO_SUCH_VARIABLE' (the "
                           "upstream's API key) is not set\n")


def test_a_proxy_killed_mid_answer_is_continued_by_another(standin: tuple[Uvicorn, Path],
                                                           redis_session: RedisServer) -> None:
    redis_session.flush()
    log = f"{redis_session.url}?lease_ms={LEASE_MS}&block_ms={BLOCK_MS}"
    flags = ("--log", log, "--takeover", "continue", "--continue-final-message", "--quiet")
    first, second = Proxy(standin[0].url + "/v1", *flags), Proxy(standin[0].url + "/v1", *flags)
    calls = standin[1]
    try:
        created = first.client().responses.create(model="n=40,delay_ms=40", input="count", background=True,
                                                  stream=True)
        seen = []
        for event in created:
            seen.append(event)
            if event.type == "response.output_text.delta" and event.delta == " u5":
                break
        first.stop(signal.SIGKILL)
        rest = list(second.client().responses.retrieve(seen[0].response.id, stream=True,
                                                       starting_after=seen[-1].sequence_number))
    finally:
        first.stop(signal.SIGKILL)
        second.stop()
    events = seen + rest
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert "".join(event.delta for event in events if event.type == "response.output_text.delta") == text(40)
    assert events[-1].type == "response.completed" and events[-1].response.output_text == text(40)
    continued = [json.loads(line) for line in calls.read_text().splitlines()
                 if json.loads(line)["continue_final_message"]]
    assert len(continued) == 1
    partial = continued[0]["messages"][-1]
    assert partial["role"] == "assistant" and partial["content"] == text(partial["content"].count(" u"))
    assert partial["content"].startswith(text(6)) and continued[0]["add_generation_prompt"] is False
    assert continued[0]["messages"][:-1] == [{"role": "user", "content": "count"}]


def test_every_protocol_relays_the_upstream(standin: tuple[Uvicorn, Path]) -> None:
    """tokenwire's frames and the AI SDK's chat, through a proxy with its own --model: the stand-in's text."""
    calls = standin[1]
    one = Proxy(standin[0].url + "/v1", "--model", "n=5,tag=protocols", "--quiet")
    try:
        base = one.url.removesuffix("/v1")
        assert token_text(httpx.get(base + "/stream?prompt=hello", timeout=30).content) == text(5)
        chat = httpx.post(base + "/chat", timeout=30, json={"messages": [
            {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi "}, {"type": "text", "text": "you"}]}]})
        deltas = [json.loads(line[6:]) for line in chat.text.splitlines() if line.startswith("data: {")]
        assert "".join(chunk["delta"] for chunk in deltas if chunk["type"] == "text-delta") == text(5)
        assert deltas[-1] == {"type": "finish", "finishReason": "stop"}
    finally:
        one.stop()
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    asked = [call["messages"] for call in seen if call["model"] == "n=5,tag=protocols"]
    assert asked == [[{"role": "user", "content": "hello"}], [{"role": "user", "content": "hi you"}]]


def test_models_are_the_upstreams_or_the_proxys_own(proxy: Proxy, standin: tuple[Uvicorn, Path]) -> None:
    assert [model.id for model in proxy.client().models.list()] == ["standin"]
    named = Proxy(standin[0].url + "/v1", "--model", "n=3", "--quiet")
    closed = Proxy(f"http://127.0.0.1:{free_port()}/v1", "--quiet")
    try:
        assert [model.id for model in named.client().models.list()] == ["n=3"]
        with pytest.raises(openai.APIStatusError) as refused:
            closed.client().models.list()
        assert refused.value.status_code == 502
        assert refused.value.body == {"message": "the model could not list its models (UpstreamRefused)",
                                      "type": "server_error", "code": None}
    finally:
        named.stop()
        closed.stop()
