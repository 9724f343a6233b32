"""The report as JSON-ready data: the same figures as the text and HTML, computed once in the model."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

from .model import Report
from .sections import Resume

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["report_json"]


def _resume_json(r: Resume) -> dict[str, object]:
    return {
        "on_disconnect": r.mode, "first_tokens": r.first_tokens, "last_event_id": r.last_event_id,
        "first_completed": r.first_completed, "generated_at_hang_up": r.generated_at_hang_up,
        "generated_before_cancel": r.generated_at_reconnect if r.mode == "cancel" else None,
        "generated_at_reconnect": r.generated_at_reconnect, "generated_while_away": r.generated_while_away,
        "resumed_at": r.resumed_at, "second_tokens": r.second_tokens, "completed": r.completed,
        "replayed": r.replayed, "ids_head": list(r.ids_head), "ids_tail": list(r.ids_tail),
        "contiguous": r.contiguous, "duplicates": list(r.duplicates), "text_matches": r.text_matches,
        "generated_total": r.generated_total, "hang_up_ms": r.hang_up_ms, "reconnect_ms": r.reconnect_ms,
        "waited_for_model_ms": r.waited_for_model_ms, "catch_up_ms": r.catch_up_ms,
    }


def _record(record: DataclassInstance, leave_out: str = "") -> dict[str, object]:
    """A frozen record's fields as a dict, ``leave_out`` left out."""
    return {f.name: getattr(record, f.name) for f in fields(record) if f.name != leave_out}


def report_json(report: Report) -> dict[str, object]:
    """Return the report as a JSON-ready dict; the same figures as the text and HTML.

    Over sockets ``scenario`` and ``detail`` are None (no scenario was
    chosen, and ``params`` leaves it out), ``buffer`` and ``resume`` hold the
    runs the demo made, and ``transport``, ``sockets`` (section 5) and
    ``wall_s`` are added.
    """
    p, w, t, s, d = report.params, report.wire, report.timing, report.sockets, report.detail
    buffer = {row.policy: {
        "delivered": row.delivered, "total": row.total, "dropped": row.dropped, "gap_runs": row.gap_runs,
        "high_water": row.high_water, "capacity": row.capacity, "producer_waited_ms": row.producer_waited_ms,
        "pauses": row.pauses, "wall_ms": row.wall_ms, "cuts": row.cuts, "reconnects": row.reconnects,
        "lost_runs": [list(run) for run in row.lost],
    } for row in report.buffer}
    resume = _resume_json(report.resume)
    if report.detach is not None:
        resume["detach"] = _resume_json(report.detach)
    head: dict[str, object] = {"scenario": None if d is None else p.scenario, "clock": p.clock}
    if s is not None:
        head["transport"] = report.transport
    data: dict[str, object] = {
        **head, "params": _record(p, "scenario" if d is None else ""),
        "wire": {"first_frames": w.first_frames, "closing_frame": w.closing, "frames_skipped": w.skipped,
                 "frames_read": w.frames_read, "token_frames": w.token_frames, "round_trip": w.round_trip},
        "timing": _record(t, "first_token_percent"),
        "buffer": buffer, "resume": resume,
        "detail": None if d is None else {
            "scenario": d.scenario, "section": d.section, "run": d.run, "decisions": d.decisions,
            "rows": [None if row is None else _record(row) for row in d.rows]},
    }
    if s is not None:
        resume["sent_when_noticed"] = s.sent_when_noticed
        data["sockets"] = {
            "sndbuf_asked": s.sndbuf_asked, "rcvbuf_asked": s.rcvbuf_asked, "recv_chunk": s.recv_chunk,
            "connections": {name: _record(k) for name, k in s.connections.items()},
            "kernel_defaults": None if s.kernel_defaults is None else dict(zip(("tcp_rmem", "tcp_wmem"),
                                                                               s.kernel_defaults, strict=True)),
            "answer_bytes": s.answer_bytes, "in_memory": _record(s.in_memory),
        }
        data["wall_s"] = s.wall_s
    return data
