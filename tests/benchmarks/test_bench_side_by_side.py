"""``python -m bench --quick --only 14,15,16`` and ``--only 17``: the floors, the text answer against its baseline
commit, the typed parts and the Redis log against the memory log print well-formed rows (no timing is asserted: only
that every server ran and delivered every stream whole)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

from support.requirements import ROOT, require_binary, skip_or_fail

# --quick runs the three items in well under a minute; a loaded CI machine gets ample slack.
TIMEOUT_S = 600
# The quick sizes (bench/floors.py, text_cost.py, parts_cost.py, log_cost.py).
N, BIG = 40, 100


def test_quick_side_by_side_items(tmp_path) -> None:
    out_json = tmp_path / "rows.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", "--only", "F,T,Q", "--json", str(out_json)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.startswith("tokenwire bench (python -m bench --quick) on "), done.stdout[:500]
    assert "FAILED" not in done.stdout, done.stdout
    rows = json.loads(out_json.read_text())["rows"]
    by_item: dict[int, list[dict]] = {}
    for row in rows:
        by_item.setdefault(row["item"], []).append(row)
    assert set(by_item) == {14, 15, 16}, by_item.keys()

    # Item 14: five servers' rows, each N/N complete (the floors answer what the client checks), four ratios, N=BIG x2.
    floors = by_item[14]
    assert len(floors) == 11, floors
    for row in floors[:5]:
        assert re.fullmatch(rf"\d+\.\d, {N}/{N}", row["ours"]), row
    for row in floors[5:9]:
        _well_formed_ratio(row)
    for row in floors[9:]:
        assert row["name"].startswith(f"N={BIG} "), row
        assert re.fullmatch(rf"{BIG}/{BIG} \| \d+ ms \| \d+\.\d\dx", row["ours"]), row
        assert isinstance(row["met"], bool), row

    # Item 15: the baseline's servers imported the worktree's code, and the worktree is gone.
    text = by_item[15]
    if text[0]["ours"] == "not run":   # no git or no baseline commit (a shallow clone): the row says why
        assert any(note.startswith("no baseline: ") for note in text[0]["notes"]), text
    else:
        assert len(text) == 2, text
        for row in text:
            _well_formed_ratio(row)
        imported = [m for note in text[0]["notes"] for m in re.findall(r"imported (\S+)/tokenwire/__init__\.py;", note)]
        assert imported and "tokenwire-baseline-" in imported[0] and not imported[0].startswith(str(ROOT)), text
        assert not os.path.exists(imported[0])
        listed = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True)
        assert imported[0] not in listed.stdout, listed.stdout

    # Item 16: per entry, tools / text, on both servers; every entry of the tools answer counted.
    parts = by_item[16]
    assert len(parts) == 2, parts
    for row in parts:
        _well_formed_ratio(row)
    assert any(re.search(rf"serve tools N={N}: {N}/{N} complete", note) for note in parts[-1]["notes"]), parts


def test_quick_log_cost_item(tmp_path) -> None:
    """Item 17: Redis / memory, the text answer and typed parts, on both servers; every stream whole on both logs."""
    require_binary("redis-server")
    if importlib.util.find_spec("redis") is None:
        skip_or_fail("item 17 needs the redis package: pip install -e '.[redis]'", "redis")
    out_json = tmp_path / "rows.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", "--only", "L", "--json", str(out_json)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-4000:]
    logs = json.loads(out_json.read_text())["rows"]
    assert {row["item"] for row in logs} == {17}, logs
    assert [row["name"].split(": ", 1)[1].split(" (")[0] for row in logs] == [
        "CPU per token, Redis / memory", "CPU per entry with typed parts, Redis / memory"] * 2, logs
    for row in logs:
        _well_formed_ratio(row)
    for name in ("serve", "tokenwire.asgi"):
        for log in ("memory", "redis", "memory tools", "redis tools"):
            assert any(re.search(rf"round 1: {name} {log} N={N}: {N}/{N} complete\+contiguous", note)
                       for note in logs[-1]["notes"]), (name, log, logs[-1]["notes"])


def _well_formed_ratio(row: dict) -> None:
    assert re.fullmatch(r"\d+\.\d us", row["ours"]), row
    assert re.fullmatch(r".+ \d+\.\d us", row["peer"]), row
    assert isinstance(row["ratio"], float) and row["ratio"] > 0, row
    assert re.fullmatch(r"<= \d+(\.\d+)?x", row["goal"]), row
    assert isinstance(row["met"], bool), row
