"""The report model and its text and JSON renderings: computed, consistent, and laid out as the seed page."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from itertools import pairwise

import pytest

from tokenwire.core.metrics import timing_from_arrivals
from tokenwire.core.model import ANSWER
from tokenwire.core.pipeline import RunResult, RunSpec, run
from tokenwire.report.model import Report, assemble, build_report
from tokenwire.report.params import DEFAULTS, SCENARIOS, ReportParams, parse_query
from tokenwire.report.plan import (
    BASELINE_BUFFER,
    DEMO_KERNEL_TOKENS,
    DEMO_OVERHEAD_S,
    DEMO_PARAMS,
    DEMO_RUNS,
    POLICIES,
    demo_estimate_s,
    estimate_wall_ms,
    plan,
    plan_demo,
)
from tokenwire.report.render import render, render_report, report_json
from tokenwire.report.sections import TRACE_MAX_ROWS
from tokenwire.report.transport import KernelFigures, Sockets, in_memory

# The seed page's sections and labels, in order (hosted-page.txt), in the page's copy: sentences start
# with a capital, the decision values read as what happened to the token, blank lines between paragraphs.
SEED_ORDER = [
    "STREAMING, BACKPRESSURE AND RESUME", "you chose", "question", "answer length", "buffer", "slow reader",
    "TRIMMED FOR THIS PAGE",
    "1. WHAT ACTUALLY GOES DOWN THE WIRE", "A fast reader, so nothing is queued", "| retry: 750", "| ...",
    "And the closing frame:", "Fed back through the project's own parser", "The id on each frame is the token index",
    "2. TIMING", "time to first token", "whole answer", "share waiting for the first token", "between tokens",
    "throughput", "Time to first token is the number a reader can feel", "(p95) is tracked separately",
    "3. THE BUFFER UNDER A SLOW READER", "policy", "Under block the reader got all", "Under drop-newest the run",
    "Under disconnect the reader was cut off", "Drop-newest and drop-oldest both lose", "None of them is free",
    "For an answer someone is reading, block is right",
    "4. DISCONNECT AND RESUME", "first connection", "producer stopped", "reconnect sends", "second connection",
    "event ids received", "contiguous 0..69", "duplicated ids", "text matches a stream that was never interrupted",
    "model steps", "The resume is served out of the logged tokens",
    "Nothing above opened a connection", "The clock is virtual:",
]


@pytest.fixture(scope="module")
def default() -> Report:
    return build_report(DEFAULTS)


@pytest.fixture(scope="module")
def default_text(default: Report) -> str:
    return render_report(default).decode()


def test_text_follows_the_seed_page_section_for_section(default_text: str) -> None:
    position = 0
    for label in SEED_ORDER:
        found = default_text.find(label, position)
        assert found >= 0, f"{label!r} missing or out of order after position {position}"
        position = found + len(label)


def test_text_lines_fit_78_columns_except_quoted_frames(default_text: str) -> None:
    for scenario in SCENARIOS:
        text = render_report(build_report(replace(DEFAULTS, scenario=scenario))).decode()
        long = [line for line in text.splitlines() if len(line) > 78 and not line.startswith("| data: {")]
        assert long == [], scenario


def test_figures_are_the_cores_own(default: Report) -> None:
    baseline = run(RunSpec(tokens=70, capacity=BASELINE_BUFFER, reader_ms=0, stream_id="baseline"))
    timing = timing_from_arrivals(baseline.arrivals_ns)
    assert default.timing.ttft_ms == round(timing.ttft_ms, 2)
    assert default.timing.itl_p95_ms == round(timing.itl_p95_ms or 0, 2)
    assert default.timing.tokens_per_s == round(timing.tokens_per_s)
    block = run(RunSpec(tokens=70, capacity=4, reader_ms=3, stream_id="block"))
    row = default.row("block")
    assert (row.delivered, row.dropped, row.pauses) == (70, 0, block.stats.pauses)
    assert row.producer_waited_ms == round(block.stats.waited_ns / 1e6, 1)
    assert row.wall_ms == round(block.wall_ns / 1e6, 1)


def test_wire_section(default: Report) -> None:
    wire = default.wire
    baseline = default.runs["baseline"]
    assert wire.first_frames.encode() == b"".join(baseline.frames[0][:4])
    assert wire.closing.encode() == baseline.frames[0][-1]
    assert (wire.frames_read, wire.token_frames, wire.skipped, wire.round_trip) == (72, 70, 67, True)
    assert wire.spaced_token == " streaming" and "data:  streaming\n" in wire.first_frames
    assert '"buffer": 64' in wire.shown[0] and "retry: 750\n" in wire.shown[0]
    assert "event: done" in wire.closing and "id: 69" in wire.closing


def test_buffer_rows_account_for_every_token(default: Report) -> None:
    assert [row.policy for row in default.buffer] == list(POLICIES)
    for row in default.buffer:
        assert row.delivered + row.dropped == row.total == 70
        assert len(row.lost) == row.gap_runs and sum(n for _, n in row.lost) == row.dropped
        assert "".join(text for text, _ in row.pieces) == "".join(ANSWER[:70])
        assert sum(lost for _, lost in row.pieces) == row.dropped
        assert row.high_water <= row.capacity
    drop, cut, block = default.row("drop-newest"), default.row("disconnect"), default.row("block")
    assert drop.dropped > 0 and drop.producer_waited_ms == 0 and drop.wall_ms < block.wall_ms
    # disconnect costs wall time, not tokens: every token, at least one cut, slower than block
    assert cut.delivered == 70 and cut.dropped == 0 and cut.cuts >= 1 and cut.reconnects == cut.cuts
    assert cut.wall_ms > block.wall_ms + default.retry_ms * cut.cuts * 0.9


def test_resume_section(default: Report) -> None:
    assert default.detach is not None            # the page runs every run of the plan
    for r in (default.resume, default.detach):
        assert (r.first_tokens, r.last_event_id, r.resumed_at, r.first_completed) == (18, "17", 18, False)
        assert r.second_tokens == 52 and r.completed
        assert r.contiguous and r.duplicates == () and r.text_matches
        assert r.generated_total == 70 and r.steps_max == 1 and r.generated_once
        assert r.ids_head == (0, 1, 2, 3) and r.ids_tail == (66, 67, 68, 69)
        assert r.reconnect_ms == pytest.approx(r.hang_up_ms + default.retry_ms, abs=0.11)
    cancel, detach = default.resume, default.detach
    # cancel stops within one token of the cut: what the reader had, the buffer, and one in hand
    assert cancel.first_tokens < cancel.generated_at_reconnect <= cancel.first_tokens + DEFAULTS.buffer + 1
    assert cancel.generated_while_away <= 1 and cancel.replayed == cancel.generated_at_reconnect - 18
    assert detach.generated_at_reconnect == 70 and detach.replayed == 52
    assert detach.generated_while_away == 70 - detach.generated_at_hang_up > 0


def test_fast_reader_shows_the_cost_of_cancel_as_waiting() -> None:
    report = build_report(parse_query("reader_ms=0"))
    assert report.detach is not None
    assert report.resume.waited_for_model_ms > 0            # the model restarts for the rest of the answer
    assert report.detach.waited_for_model_ms == 0           # everything is already in the log
    assert report.row("block").high_water < report.row("block").capacity
    assert "the buffer never fills" in render_report(report).decode()


@pytest.mark.parametrize("query", ["tokens=2", "tokens=3", "tokens=277&reader_ms=0.5", "buffer=64",
                                   "buffer=1&reader_ms=10&producer_ms=0.1", "seed=7&cut_after=1",
                                   "tokens=40&cut_after=39&scenario=drop-oldest"])
def test_edges_render_and_stay_consistent(query: str) -> None:
    params = parse_query(query)
    report = build_report(params)
    assert report.detach is not None
    for r in (report.resume, report.detach):
        assert r.contiguous and r.text_matches and r.generated_once
        assert r.first_tokens == params.cut_after and r.resumed_at == params.cut_after
    assert report.wire.token_frames == params.tokens and report.wire.frames_read == params.tokens + 2
    text = render_report(report).decode()
    assert ("TRIMMED FOR THIS PAGE" in text) == (params.tokens < len(ANSWER))
    assert ("FULL ANSWER" in text) == (params.tokens == len(ANSWER))
    for fmt in ("json", "html"):
        assert render_report(replace(report, params=replace(params, format=fmt)))


@pytest.mark.parametrize("scenario, section, run_name", [
    ("baseline", 2, "baseline"), ("block", 3, "block"), ("drop-newest", 3, "drop-newest"),
    ("drop-oldest", 3, "drop-oldest"), ("disconnect", 4, "cancel")])
def test_detail_block_per_scenario(scenario: str, section: int, run_name: str) -> None:
    report = build_report(replace(DEFAULTS, scenario=scenario))
    detail = report.detail
    assert detail is not None
    assert (detail.scenario, detail.section, detail.run) == (scenario, section, run_name)
    rows = [row for row in detail.rows if row is not None]
    assert 0 < len(rows) <= TRACE_MAX_ROWS and detail.rows[0] is not None and detail.rows[-1] is not None
    assert [row.index for row in rows] == sorted(row.index for row in rows)
    assert all(a is not None or b is not None for a, b in pairwise(detail.rows))  # no double gap
    text = render_report(report).decode()
    assert f"Detail for {scenario}: the {run_name} run" in text
    headings = [m.start() for m in re.finditer(r"^[1-4]\. [A-Z]", text, re.M)] + [len(text)]
    where = text.index(f"Detail for {scenario}")
    assert headings[section - 1] < where < headings[section]
    if scenario.startswith("drop"):
        assert "lost]" in text[where:]


def test_same_params_same_bytes() -> None:
    assert render("scenario=block&tokens=40") == render("scenario=block&tokens=40")
    assert render("format=html&seed=3")[2] == render("format=html&seed=3")[2]


def test_seed_changes_the_figures() -> None:
    assert build_report(parse_query("seed=2")).timing != build_report(DEFAULTS).timing


# ---------------------------------------------------------------- text and JSON agree


def _after(text: str, label: str) -> str:
    match = re.search(rf"^{re.escape(label)}\s+(.*)$", text, re.M)
    assert match, label
    return match.group(1)


def _number(text: str) -> float:
    match = re.search(r"-?\d+(?:\.\d+)?", text)
    assert match, text
    return float(match.group())


@pytest.mark.parametrize("query", ["", "scenario=block&tokens=120&buffer=8&reader_ms=1.5", "reader_ms=0&seed=9"])
def test_text_and_json_agree(query: str) -> None:
    status, _, body = render(query)
    status_j, _, body_j = render(query + ("&" if query else "") + "format=json")
    assert status == status_j == 200
    text, data = body.decode(), json.loads(body_j)
    p = data["params"]
    assert data["scenario"] == p["scenario"] and _after(text, "you chose") == p["scenario"]
    assert data["clock"] == "virtual" and "The clock is virtual:" in text
    # 1. the wire: the quoted frames are the JSON's first_frames, the counts the same
    quoted = re.search(r"closed by a blank line:\n(.*?)\n\| \.\.\.\n", text, re.S)
    assert quoted, text[:3000]
    lines = [line[2:] if line.startswith("| ") else "" for line in quoted.group(1).split("\n")]
    assert "\n".join(lines) + "\n" == data["wire"]["first_frames"]
    assert f"{data['wire']['frames_read']} frames read, {data['wire']['token_frames']} of them tokens" in " ".join(
        text.split())
    # 2. timing
    t = data["timing"]
    assert _number(_after(text, "time to first token")) == t["ttft_ms"]
    assert _number(_after(text, "whole answer")) == t["total_ms"]
    assert _number(_after(text, "share waiting for the first token")) == pytest.approx(100 * t["first_token_share"],
                                                                                     abs=0.051)
    between = re.findall(r"\d+\.\d+", _after(text, "between tokens"))
    assert [float(x) for x in between] == [t["itl_p50_ms"], t["itl_p95_ms"], t["itl_max_ms"]]
    assert _number(_after(text, "throughput")) == t["tokens_per_s"]
    # 3. the table, row by row
    for policy, row in data["buffer"].items():
        cells = re.search(rf"^{policy}\s+(\d+) of (\d+)\s+(\d+)\s+(\d+)\s+(\d+) of (\d+)\s+([\d.]+) ms\s+([\d.]+)$",
                          text, re.M)
        assert cells, policy
        got = [float(x) for x in cells.groups()]
        assert got == [row["delivered"], row["total"], row["dropped"], row["gap_runs"], row["high_water"],
                       row["capacity"], row["producer_waited_ms"], row["wall_ms"]]
    # 4. resume
    r = data["resume"]
    assert _after(text, "first connection") == (f"{r['first_tokens']} tokens, last event id {r['last_event_id']}, "
                                                f"completed={r['first_completed']}")
    flat = " ".join(text.split())      # wrapped sentences, on one line
    assert f"generated {r['generated_before_cancel']} tokens then saw the cancel" in flat
    assert _after(text, "reconnect sends") == f"Last-Event-ID: {r['last_event_id']}"
    assert _after(text, "second connection") == (f"resumed at index {r['resumed_at']}, {r['second_tokens']} more "
                                                 f"tokens, completed={r['completed']}")
    assert _after(text, f"contiguous 0..{p['tokens'] - 1}") == str(r["contiguous"])
    assert _after(text, "duplicated ids") == ("none" if not r["duplicates"] else str(r["duplicates"]))
    assert _after(text, "text matches a stream that was never interrupted") == str(r["text_matches"])
    assert _number(_after(text, "model steps")) == r["generated_total"] == p["tokens"]
    assert f"{r['detach']['generated_while_away']} tokens generated while nobody was reading" in flat
    assert f"waited {r['waited_for_model_ms']:.1f} ms for the model" in flat


def test_json_has_the_documented_keys(default: Report) -> None:
    data = report_json(default)
    assert {"scenario", "clock", "params", "wire", "timing", "buffer", "resume"} <= data.keys()
    assert {"first_frames", "frames_read", "token_frames"} <= data["wire"].keys()
    assert {"ttft_ms", "total_ms", "first_token_share", "itl_p50_ms", "itl_p95_ms", "itl_max_ms",
            "tokens_per_s"} <= data["timing"].keys()
    assert set(data["buffer"]) == set(POLICIES)
    for row in data["buffer"].values():
        assert {"delivered", "dropped", "gap_runs", "high_water", "producer_waited_ms", "pauses",
                "wall_ms"} <= row.keys()
    assert {"first_tokens", "last_event_id", "generated_before_cancel", "resumed_at", "second_tokens", "completed",
            "contiguous", "duplicates", "text_matches", "generated_total"} <= data["resume"].keys()
    json.dumps(data, allow_nan=False)   # plain JSON: no NaN or Infinity anywhere


def test_two_spaces_are_explained_in_a_whole_sentence(default_text: str) -> None:
    assert "| data:  streaming\n" in default_text
    paragraph = next(p for p in default_text.split("\n\n") if p.startswith("Two spaces"))
    assert " ".join(paragraph.split()) == ('Two spaces after "data:" where a token starts with one: the parser strips '
                                          'the first, and the token (" streaming") keeps its own.')


def test_params_other_than_defaults_show_up(default: Report) -> None:
    text = render("tokens=30&buffer=6&reader_ms=2.5&producer_ms=0.25&cut_after=7")[2].decode()
    assert _after(text, "answer length").startswith("30 tokens")
    assert _after(text, "buffer").startswith("6 slots")
    assert _after(text, "slow reader") == "2.5 ms per token, against a producer that needs 0.25 ms"
    assert "the connection dies after 7 tokens" in text and "contiguous 0..29" in text


# A count of one with a plural noun: "the 1 tokens already in the log", "1 slots", "1 gaps".
_ONE_AND_PLURAL = re.compile(r"\b1 (?:more )?(?:tokens|slots|runs|pauses|gaps|model steps)\b")


@pytest.mark.parametrize("query", ["tokens=2&buffer=1&cut_after=1&reader_ms=0", "tokens=1&scenario=drop-newest",
                                   "tokens=3&buffer=1&cut_after=1&reader_ms=1", "tokens=2&cut_after=0&buffer=2"])
@pytest.mark.parametrize("fmt", ["text", "html"])
def test_counts_agree_with_their_nouns(query: str, fmt: str) -> None:
    text = render(f"{query}&format={fmt}")[2].decode()
    text = re.sub(r"<[^>]+>", "", text) if fmt == "html" else " ".join(text.split())
    assert _ONE_AND_PLURAL.findall(text) == []


def test_one_of_a_thing_is_said_in_the_singular() -> None:
    text = " ".join(render("tokens=2&buffer=1&cut_after=0&reader_ms=0")[2].decode().split())
    assert "the 1 token already in the log came from there" in text
    assert "answer length 2 tokens, one SSE frame each" in text and "buffer 1 slot between the producer" in text
    assert "The 1 gap between tokens, by percentile" in render("tokens=2&format=html")[2].decode()


def test_a_reader_as_fast_as_the_producer_is_not_called_slow() -> None:
    text = render("reader_ms=0")[2].decode()
    assert "\nreader             0 ms per token, against a producer that needs 0.5 ms\n" in text
    assert "\nslow reader  " not in text
    page = render("reader_ms=0.5&format=html")[2].decode()
    assert "<dt>reader</dt><dd>0.5 ms per token" in page and "<dt>slow reader</dt>" not in page


def test_real_clock_report_is_measured_on_threads() -> None:
    params = ReportParams(clock="real", tokens=12, buffer=2, cut_after=3, reader_ms=2, format="json")
    data = report_json(build_report(params))
    assert data["clock"] == "real"
    assert data["resume"]["contiguous"] and data["resume"]["text_matches"] and data["resume"]["generated_total"] == 12
    assert data["buffer"]["disconnect"]["cuts"] >= 1
    assert data["buffer"]["disconnect"]["wall_ms"] >= 750      # the retry really was waited out


# ---------------------------------------------------------------- HTML and the command line


def test_html_escapes_everything_and_hashes_its_only_style(default: Report) -> None:
    import base64
    import hashlib

    from tokenwire.report.templating import csp

    hostile = replace(default, params=replace(DEFAULTS, format="html"), question='<script>alert("x")</script>&')
    page = render_report(hostile).decode()
    assert "<script" not in page and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;" in page
    assert " style=" not in page and page.count("<style>") == 1
    css = page.split("<style>", 1)[1].split("</style>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    CSP = csp()
    assert f"style-src 'sha256-{digest}'" in CSP and "script-src" not in CSP and "default-src 'none'" in CSP


def test_html_links_keep_the_visitors_parameters() -> None:
    page = render("format=html&tokens=40&reader_ms=2")[2].decode()
    assert 'href="?scenario=block&amp;format=html&amp;tokens=40&amp;reader_ms=2"' in page
    assert 'href="?tokens=40&amp;reader_ms=2"' in page                      # the text version
    assert '<form method="get" action="">' in page and 'name="format" value="html"' in page


def test_cli_prints_the_handlers_figures_in_the_commands_words(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    from tokenwire.report.render import cli_main

    assert cli_main(["--scenario", "block", "--format=json", "--tokens", "30"]) == 0
    assert capsysbinary.readouterr().out == render("scenario=block&format=json&tokens=30")[2]
    assert cli_main([]) == 0
    printed, page = (" ".join(b.decode().split()) for b in (capsysbinary.readouterr().out, render("")[2]))
    # The command speaks of itself and its flags, the hosted page of itself and its query parameters.
    assert "Run the command with --clock real" in printed and "Add clock=real" in page
    assert "TRIMMED FOR THIS REPORT" in printed and "TRIMMED FOR THIS PAGE" in page
    assert "serverless" not in printed and "this page" not in printed and "clock=real" not in printed
    assert "the same flags print the same bytes" in printed and "the same URL gives the same bytes" in page
    assert printed.split("3. THE BUFFER")[1].split("Over TCP")[0] == page.split("3. THE BUFFER")[1].split("Over TCP")[0]


@pytest.mark.parametrize("argv, fragment", [
    (["--tokens", "0"], "--tokens must be a whole number from 1 to 277; got '0'"),
    (["--colour", "red"], "unknown flag '--colour'"),
    (["--clock", "real", "--tokens", "277", "--reader-ms", "6"], "use --clock virtual"),
    (["report"], "unexpected argument 'report'"),
])
def test_cli_bad_flags_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str],
                                            fragment: str) -> None:
    from tokenwire.cli import main  # the command as typed: it words the report's ParamError

    assert main(["report", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("tokenwire report: ") and fragment in err


def test_cli_help(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenwire.report.render import cli_main

    assert cli_main(["--help"]) == 0
    assert "--reader-ms" in capsys.readouterr().out


# ---------------------------------------------------------------- assemble: given runs, either transport


def _runs(params: ReportParams, names: tuple[str, ...] | None = None) -> dict[str, RunResult]:
    return {name: run(spec) for name, spec in plan(params).items() if names is None or name in names}


def _sockets(runs: dict[str, RunResult]) -> Sockets:
    """Section 5 as the demo would fill it, with made-up kernel figures (no socket is opened here)."""
    kernel = KernelFigures(sndbuf=8192, rcvbuf=8192, send_queue_max=240, recv_queue_max=1900,
                           in_kernel_bytes_max=1950, in_kernel_tokens_max=59, reader_held_max=2, channel_depth_max=4,
                           samples=70, channel_high_water=4, channel_capacity=4)
    return Sockets(sndbuf_asked=4096, rcvbuf_asked=4096, recv_chunk=64,
                   connections={name: kernel for name in ("baseline", "block", "drop-newest", "cut", "resume")},
                   sent_when_noticed=40, kernel_defaults=(131072, 16384),
                   answer_bytes=sum(map(len, runs["baseline"].frames[0])), in_memory=in_memory(DEFAULTS), wall_s=4.7)


def test_build_report_is_plan_run_assemble(default: Report) -> None:
    again = assemble(DEFAULTS, _runs(DEFAULTS))
    assert render_report(again) == render_report(default)
    assert again.transport == "memory" and again.sockets is None and again.absent_policies == ()


def test_assemble_leaves_absent_runs_out() -> None:
    report = assemble(DEFAULTS, _runs(DEFAULTS, ("baseline", "block", "drop-newest", "cancel")))
    assert [row.policy for row in report.buffer] == ["block", "drop-newest"] and report.detach is None
    assert report.absent_policies == ("drop-oldest", "disconnect")
    text = render_report(report).decode()
    assert "drop-oldest and disconnect are not run in this report." in text
    assert "What each choice of on_disconnect cost" not in text and "Detail for disconnect" in text
    data = report_json(report)
    assert set(data["buffer"]) == {"block", "drop-newest"} and "detach" not in data["resume"]


@pytest.mark.parametrize("scenario, names, transport, with_sockets, fragment", [
    ("disconnect", ("block", "cancel"), "memory", False, "missing ['baseline']"),
    ("drop-oldest", ("baseline", "block", "cancel"), "memory", False, "missing ['drop-oldest']"),  # its detail
    ("disconnect", POLICIES + ("baseline", "cancel"), "carrier-pigeon", False, "got 'carrier-pigeon'"),
    ("disconnect", DEMO_RUNS, "sockets", False, "sockets=None"),
    ("disconnect", DEMO_RUNS, "memory", True, "sockets=given"),
])
def test_assemble_refuses_what_it_cannot_lay_out(scenario: str, names: tuple[str, ...], transport: str,
                                                 with_sockets: bool, fragment: str) -> None:
    params = replace(DEFAULTS, scenario=scenario)
    runs = _runs(params)
    given = {name: runs[name] for name in names}
    with pytest.raises(ValueError, match=re.escape(fragment)):
        assemble(params, given, transport=transport,  # type: ignore[arg-type]
                 sockets=_sockets(runs) if with_sockets else None)
    with pytest.raises(ValueError, match=re.escape("unknown ['extra']")):
        assemble(params, {**runs, "extra": runs["block"]})


def test_the_sockets_transport_switches_title_clock_closing_and_adds_section_5() -> None:
    runs = _runs(DEFAULTS, DEMO_RUNS)
    report = assemble(replace(DEFAULTS, clock="real"), runs, transport="sockets", sockets=_sockets(runs))
    text = render_report(report).decode()
    assert text.startswith("STREAMING, BACKPRESSURE AND RESUME") and "measured over loopback sockets" in text
    assert "protocol and buffers, no socket" not in text and "One honest note" not in text
    assert "you chose" not in text and "TRIMMED FOR THIS PAGE" not in text
    assert _after(text, "clock").startswith("real: every figure below was measured just now, over TCP")
    assert _after(text, "runs").startswith("five connections in 4.7 s")
    flat = " ".join(text.split())
    assert "drop-oldest and disconnect are not run over sockets by the demo; the page shows them in memory." in flat
    assert "the server had sent 40 and generated" in flat and "750 ms later (the retry the open frame set)" in flat
    assert "5. WHERE THE SLOWNESS WENT" in text and re.search(r"^block +4 of 4 +59 +1950 +240 +1900 +2$", text, re.M)
    assert "What this corrects on the page." in text and "second, hidden queue" not in text
    assert "Everything above crossed a real socket" in text and "Nothing above opened a connection" not in text
    assert text.index("4. DISCONNECT AND RESUME") < text.index("5. WHERE") < text.index("Everything above")
    data = report_json(replace(report, params=replace(report.params, format="json")))
    assert data["transport"] == "sockets" and data["scenario"] is None and data["detail"] is None
    assert "scenario" not in data["params"] and set(data["buffer"]) == {"block", "drop-newest"}
    assert data["resume"]["sent_when_noticed"] == 40 and data["wall_s"] == 4.7
    assert data["sockets"]["connections"]["block"]["in_kernel_tokens_max"] == 59
    assert data["sockets"]["in_memory"]["drop_delivered"] == report.sockets.in_memory.drop_delivered  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="text or json, not html"):
        render_report(replace(report, params=replace(report.params, format="html")))


def test_trim_note_quotes_the_demo_plans_estimate(default_text: str) -> None:
    estimate = demo_estimate_s()
    assert estimate == round(sum(estimate_wall_ms(spec, DEMO_KERNEL_TOKENS) for spec in plan_demo().values()) / 1000
                             + DEMO_OVERHEAD_S, 1)
    assert 4.6 <= estimate <= 5.5          # tokenwire demo took 5.0-5.1 s when measured; within 10% of that
    # the slow reader alone takes the answer twice (block, then cut + resume) plus one retry
    reader_floor = 2 * DEMO_PARAMS.tokens * DEMO_PARAMS.reader_ms / 1000 + 0.75
    assert reader_floor < estimate < reader_floor + 1
    flat = " ".join(default_text.split())
    assert (f"the full 277 token answer five times over a loopback socket with a 6 ms reader, about "
            f"{estimate:g} seconds of wall clock") in flat
    html = render("format=html")[2].decode()
    assert f"about {estimate:g} seconds of wall clock" in html


def test_the_page_names_the_kernels_second_queue(default_text: str) -> None:
    flat = " ".join(default_text.split())
    assert "Over TCP the kernel's socket buffers are a second, hidden queue" in flat
    assert "while its 4-slot channel was full" in flat and "so its figures stand" in flat
    assert "second, hidden queue" in render("format=html")[2].decode()


def test_one_token_and_a_cut_before_the_first_token() -> None:
    from tokenwire.report.render import render
    status, _, body = render("tokens=1&format=json")
    data = json.loads(body)
    assert status == 200 and data["params"]["cut_after"] == 0
    assert data["timing"]["itl_p50_ms"] is None and data["timing"]["tokens"] == 1
    assert data["resume"]["first_tokens"] == 0 and data["resume"]["last_event_id"] == ""
    assert data["resume"]["completed"] and data["resume"]["contiguous"] and data["resume"]["generated_total"] == 1
    status, _, text = render("cut_after=0")
    page = text.decode()
    assert status == 200 and "last event id none" in page
    assert "no Last-Event-ID (nothing was received, so it starts over" in page
    assert "resumed at index 0, 70 more tokens, completed=True" in page
    assert "between tokens                     none: a single token has no gap" in render("tokens=1")[2].decode()
