"""``tokenwire demo``: five connections over loopback, then the report measured over sockets.

One run in this process, its JSON checked for invariants (as the README runs it, in a fresh interpreter:
``processes/test_demo_command.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tokenwire.core.model import ANSWER
from tokenwire.demo import DEMO_RCVBUF, DEMO_SNDBUF, cli_main
from tokenwire.report.plan import demo_estimate_s

REPORT_KEYS = {"scenario", "clock", "params", "wire", "timing", "buffer", "resume", "detail"}


@pytest.fixture(scope="module")
def demo_json() -> dict[str, Any]:
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["--format", "json", "--quiet"]) == 0
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def test_the_json_has_the_report_keys_and_the_socket_figures(demo_json: dict[str, Any]) -> None:
    assert REPORT_KEYS <= set(demo_json)
    assert demo_json["clock"] == "real" and demo_json["transport"] == "sockets"
    assert set(demo_json["sockets"]["connections"]) == {"baseline", "block", "drop-newest", "cut", "resume"}
    assert demo_json["scenario"] is None and demo_json["detail"] is None and "scenario" not in demo_json["params"]


def test_the_estimate_is_not_above_what_the_demo_takes(demo_json: dict[str, Any]) -> None:
    # the reader paces itself by deadlines, so the connections cannot beat the plan's estimate
    assert demo_json["wall_s"] >= 0.9 * demo_estimate_s()


def test_every_connection_carried_the_protocol_intact(demo_json: dict[str, Any]) -> None:
    total = len(ANSWER)
    wire, timing, buffer = demo_json["wire"], demo_json["timing"], demo_json["buffer"]
    assert wire["round_trip"] and wire["token_frames"] == total and wire["frames_read"] == total + 2
    assert timing["tokens"] == total
    assert buffer["block"]["delivered"] == total and buffer["block"]["dropped"] == 0
    drop = buffer["drop-newest"]
    assert drop["delivered"] + drop["dropped"] == total and drop["dropped"] > 0
    assert drop["high_water"] == drop["capacity"]


def test_the_cut_is_resumed_to_the_uninterrupted_answer(demo_json: dict[str, Any]) -> None:
    resume, total = demo_json["resume"], len(ANSWER)
    assert resume["first_tokens"] == 18 and resume["last_event_id"] == "17" and not resume["first_completed"]
    assert resume["resumed_at"] == 18 and resume["second_tokens"] == total - 18 and resume["completed"]
    assert resume["contiguous"] and resume["duplicates"] == [] and resume["text_matches"]
    assert resume["generated_total"] == total                                # nothing generated twice
    assert 18 <= resume["sent_when_noticed"] <= resume["generated_at_reconnect"]
    assert resume["replayed"] == resume["generated_at_reconnect"] - 18


def test_the_kernel_figures_are_measured_and_consistent(demo_json: dict[str, Any]) -> None:
    sockets = demo_json["sockets"]
    assert sockets["sndbuf_asked"] == DEMO_SNDBUF and sockets["rcvbuf_asked"] == DEMO_RCVBUF
    for name, k in sockets["connections"].items():
        assert k["sndbuf"] >= DEMO_SNDBUF and k["rcvbuf"] >= DEMO_RCVBUF, name
        assert k["channel_high_water"] <= k["channel_capacity"], name
        assert k["samples"] > 0 and k["reader_held_max"] <= 2, name        # a 64-byte recv holds at most 2 frames
    block = sockets["connections"]["block"]
    assert block["in_kernel_tokens_max"] > 0 and block["in_kernel_bytes_max"] > 0
    assert sockets["answer_bytes"] > 0
