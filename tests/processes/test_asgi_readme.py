"""The README's FastAPI example, run as written: its code block is the app uvicorn serves, its model the openai
SDK's stream from a local stand-in on loopback (``OPENAI_BASE_URL``) that streams as vLLM does; its curl lines
(made with httpx-sse here) create a stream, read it, and resume it with Last-Event-ID to the exact text; the
stand-in's reasoning and tool call reach the frames as parts; its check of the request is a 400 with its message."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from support.apps import upstream_standin
from support.asgi import read_stream, uvicorn
from support.docs import asgi_example

STANDIN = "support.apps.upstream_standin:app"


def _example(tmp_path: Path) -> Path:
    code = asgi_example()
    assert 10 <= len([line for line in code.splitlines() if line.strip()]) <= 20     # about fifteen lines
    (tmp_path / "example.py").write_text(code, encoding="utf-8")
    return tmp_path


def test_the_readme_example_serves_and_resumes_as_written(tmp_path: Path) -> None:
    with uvicorn(STANDIN) as standin:
        env = {"OPENAI_BASE_URL": standin.url + "/v1", "OPENAI_API_KEY": "unused"}
        with uvicorn("example:app", app_dir=_example(tmp_path), env=env) as server:
            made = httpx.post(f"{server.url}/tokens/streams?prompt=hello+resumable+world")
            assert made.status_code == 201
            url = made.json()["events_url"]
            assert url.startswith("/tokens/streams/")
            first = read_stream(server.url + url, stop_after=5)
            rest = read_stream(server.url + url, headers={"Last-Event-ID": "4"})
            assert first.ids + rest.ids == list(range(12))
            assert first.text + rest.text == "".join(f" u{i}" for i in range(12))   # the stand-in's 12 tokens
            assert rest.events[-2].event == "finish" and rest.events[-2].id == "12"      # finish_reason: stop
            assert rest.last.event == "done" and rest.last_json()["tokens"] == 13
            too_long = httpx.post(f"{server.url}/tokens/streams", params={"prompt": "w" * 2001})
            assert (too_long.status_code, too_long.json()) == (
                400, {"error": "prompt must be 1 to 2000 characters, got 2001"})
            assert "Traceback" not in server.stderr()


def test_the_readme_examples_model_keeps_the_reasoning_and_the_tool_call(tmp_path: Path) -> None:
    with uvicorn(STANDIN) as standin:
        env = {"OPENAI_BASE_URL": standin.url + "/v1", "OPENAI_API_KEY": "unused", "MODEL": "style=vllm"}
        with uvicorn("example:app", app_dir=_example(tmp_path), env=env) as server:
            read = read_stream(f"{server.url}/tokens/stream?prompt=weather")
    kinds = [event.event for event in read.events if event.event not in ("open", "done")]
    assert kinds == ["reasoning", "reasoning", "token", "tool-call-start", "tool-call-delta", "tool-call-delta",
                     "tool-call-end", "finish"]
    assert read.text == upstream_standin.TEXT
    start = next(json.loads(event.data) for event in read.events if event.event == "tool-call-start")
    assert start == {"type": "tool-call-start", "call_id": upstream_standin.CALL_ID, "name": "get_weather"}
