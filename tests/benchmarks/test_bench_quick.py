"""``python -m bench --quick`` runs and prints its table (no timing is asserted)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from support.requirements import ROOT

# --quick aims at under a minute; a loaded CI machine gets ample slack.
TIMEOUT_S = 600


# Items 14-17 (the floors, the text answer against its baseline, typed parts, the Redis log) run in
# test_bench_side_by_side.py, which checks their rows; here every other item, so none runs twice.
SIDE_BY_SIDE = {"14", "15", "16", "17"}


def _other_items() -> str:
    """Every item of ``python -m bench`` but the side-by-side ones, as ``--only`` takes them."""
    sys.path.insert(0, str(ROOT))
    try:
        from bench.__main__ import ITEMS
    finally:
        sys.path.remove(str(ROOT))
    assert SIDE_BY_SIDE <= set(ITEMS), sorted(ITEMS)
    return ",".join(key for key in ITEMS if key not in SIDE_BY_SIDE)


def test_quick_bench_prints_its_table() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", "--only", _other_items()], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout
    assert out.startswith("tokenwire bench (python -m bench --quick) on "), out[:500]
    assert re.search(r"^#\s+measurement\s+tokenwire\s+peer / baseline\s+ratio\s+goal\s+met$", out, re.M), out
    items = {int(m) for m in re.findall(r"^(\d)\s{2}", out, re.M)}
    assert set(range(1, 8)) <= items, f"items missing from the table: {set(range(1, 8)) - items}\n{out}"
    assert "FAILED" not in out, out
    assert re.search(r"^total wall time \d+\.\d s; ", out, re.M), out
