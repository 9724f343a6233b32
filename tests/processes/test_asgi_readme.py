"""The README's FastAPI example, run as written: its code block is the app uvicorn serves, and its curl lines
(made with httpx-sse here) create a stream, read it, and resume it with Last-Event-ID to the exact text; its
check of the request is a 400 with its message, though the model is an async generator."""

from __future__ import annotations

from pathlib import Path

import httpx
from support.asgi import read_stream, uvicorn
from support.docs import asgi_example


def test_the_readme_example_serves_and_resumes_as_written(tmp_path: Path) -> None:
    code = asgi_example()
    assert 10 <= len([line for line in code.splitlines() if line.strip()]) <= 20     # about fifteen lines
    (tmp_path / "example.py").write_text(code, encoding="utf-8")
    with uvicorn("example:app", app_dir=tmp_path) as server:
        made = httpx.post(f"{server.url}/tokens/streams?prompt=hello+resumable+world")
        assert made.status_code == 201
        url = made.json()["events_url"]
        assert url.startswith("/tokens/streams/")
        first = read_stream(server.url + url, stop_after=5)
        rest = read_stream(server.url + url, headers={"Last-Event-ID": "4"})
        assert first.ids + rest.ids == list(range(12))
        assert first.text + rest.text == " ".join(["hello", "resumable", "world"] * 4)
        assert rest.last.event == "done" and rest.last_json()["tokens"] == 12
        too_long = httpx.post(f"{server.url}/tokens/streams", params={"prompt": "word " * 51})
        assert (too_long.status_code, too_long.json()) == (400, {"error": "prompt must be at most 50 words, got 51"})
        assert "Traceback" not in server.stderr()
