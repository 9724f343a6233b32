"""The live page (``/live?parts=tools``) in Chromium shows every part of the canned answer as its browser
``EventSource`` reads them: the reasoning in its own style, the tool call written as its arguments arrive, its
result, the second step, and the finish; cut in the middle of the call's arguments, the browser's own
``Last-Event-ID`` resumes it to the same page, each id once."""

from __future__ import annotations

import json

from support.cdp import browser_page
from support.live import serving

FINISHED = "['done', 'failed'].includes(document.body.dataset.state)"
# 4 reasoning pieces, 7 text tokens, the call's start, 4 argument pieces, its end, its result, a step, 15 tokens,
# the answer's 5 tokens, usage and finish: 41 parts; cut after 14 of them, in the call's arguments.
PARTS, CUT = 41, 14


def _texts(page: object, selector: str) -> list[str]:
    return page.eval(f"[...document.querySelectorAll('#answer {selector}')].map((e) => e.textContent)")  # type: ignore[attr-defined, no-any-return]


def test_the_live_page_shows_reasoning_the_tool_call_its_result_and_the_next_step() -> None:
    with serving() as server, browser_page() as page:
        page.open(f"{server.url}/live?parts=tools&tokens=5&producer_ms=5&cut_after={CUT}", 1280)
        page.wait_until(FINISHED, "the done frame", 60)
        assert page.eval("document.getElementById('status').textContent") == f"Done: {PARTS} parts, 1 reconnect."
        assert "".join(_texts(page, ".reasoning")).endswith("a tool call shows how one streams: the weather in Paris.")
        assert _texts(page, ".tool-call") == ['get_weather({"city": "Paris"})']
        assert _texts(page, ".tool-result") == ['\u2192 {"city":"Paris","temperature_c":18,"sky":"sunny"}']
        assert _texts(page, ".step") == ["next step"]
        assert "".join(_texts(page, ".tok")).startswith("Let me check the weather first. It is 18 degrees")
        style = "getComputedStyle(document.querySelector('#answer .reasoning')).fontStyle"
        assert page.eval(style) == "italic"
        seen = json.loads(page.eval("document.getElementById('result').textContent"))
        assert seen["ids"] == list(range(PARTS)) and seen["finish"] == {"type": "finish", "reason": "stop"}
        assert seen["parts"]["tool-call-delta"] == 4 and seen["usage"]["input_tokens"] == 11
        assert [c["start_index"] for c in seen["connections"]] == [0, CUT]         # resumed in the arguments
        assert page.problems() == []
        assert page.eval("document.getElementById('report-link').getAttribute('href')") == (
            f"/?tokens=5&producer_ms=5&cut_after={CUT}&format=html")
