"""``tokenwire.upstream``: any OpenAI-compatible model server (vLLM, SGLang, Ollama, llama.cpp, LM Studio) as a model.

``TokenStreams(Upstream(UpstreamConfig("http://127.0.0.1:8000/v1")))`` puts
every protocol tokenwire speaks (its frames, the AI SDK's chat, OpenAI's
chat completions and Responses) in front of it, resumable and, on Redis,
across instances; ``tokenwire proxy --upstream URL`` serves just that.
"""

from __future__ import annotations

from .frames import (
    UpstreamBroken,
    UpstreamError,
    UpstreamFailed,
    UpstreamFrames,
    UpstreamMalformed,
    UpstreamRefused,
    UpstreamStalled,
    UpstreamStatus,
)
from .relay import Upstream, UpstreamCannotContinue, UpstreamConfig, UpstreamOvertime, UpstreamTooLong

__all__ = ["Upstream", "UpstreamBroken", "UpstreamCannotContinue", "UpstreamConfig", "UpstreamError",
           "UpstreamFailed", "UpstreamFrames", "UpstreamMalformed", "UpstreamOvertime", "UpstreamRefused",
           "UpstreamStalled", "UpstreamStatus", "UpstreamTooLong"]
