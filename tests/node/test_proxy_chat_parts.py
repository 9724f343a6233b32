"""The AI SDK's own client reading ``/chat`` through the proxy (``TokenStreams(Upstream(...))``, what ``tokenwire
proxy`` serves) in front of a stand-in that streams as vLLM does: ai@6's ``DefaultChatTransport`` +
``readUIMessageStream`` (driven from node, ``chat_parts_client.mjs``) assemble the reasoning, the text and the tool
call as a tool part with its input, and the usage; the ``model`` the transport's ``body`` option adds names the
upstream's model."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from support.apps import upstream_standin
from support.asgi_thread import in_thread
from support.requirements import ROOT, require_ai_sdk

from tokenwire.asgi import TokenStreams
from tokenwire.upstream import Upstream, UpstreamConfig

DRIVER = ROOT / "tests" / "support" / "chat_parts_client.mjs"
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    with in_thread(upstream_standin.app) as upstream, \
            in_thread(TokenStreams(Upstream(UpstreamConfig(upstream + "/v1")))) as base:
        yield base


def test_the_ai_sdk_reads_the_upstreams_tool_call_as_a_tool_part(proxy: str) -> None:
    job = {"transport": "default", "api": proxy + "/chat", "chatId": "proxied", "body": {"model": "style=vllm"}}
    done = subprocess.run(["node", str(DRIVER), str(require_ai_sdk()), json.dumps(job)], capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, (done.stdout, done.stderr)
    seen: dict[str, Any] = json.loads(done.stdout)
    assert seen["errors"] == []
    message = seen["messages"][0]
    assert message["parts"] == [
        {"type": "step-start"},
        {"type": "reasoning", "id": "reasoning-0", "text": "The user asks for the weather; I should call get_weather.",
         "state": "done"},
        {"type": "text", "text": "Let me check the weather. ", "state": "done"},
        {"type": "tool-get_weather", "toolCallId": "chatcmpl-tool-7b3e", "state": "input-available",
         "input": {"city": "Paris"}}]
    assert message["metadata"] == {"usage": {"inputTokens": 20, "outputTokens": 14, "totalTokens": 34,
                                             "reasoningTokens": 6, "cachedInputTokens": 0}}
