"""Item 15: what the plain text answer costs now against the commit before typed parts, both servers, N=300.

How this works: the baseline commit (``d5e0410`` unless the environment
sets ``TOKENWIRE_BENCH_BASELINE=<rev>``) is checked out by
``git worktree add --detach`` in a temporary directory, removed when the
item ends.  Its servers run with that directory as their working
directory, ``python -m tokenwire serve ...`` and ``python -m uvicorn
tokenwire.asgi:app ...``: ``-m`` (and uvicorn's ``--app-dir .``) put the
working directory first on ``sys.path``, so they import the baseline's
``tokenwire``, not the installed one; the item checks that it does
(``tokenwire.__file__`` from the worktree) before measuring, and says
where each side imported from.  "Now" is the repository's working tree
as it is at the run (uncommitted changes to the package included: the
notes count them).  The four servers take turns (``bench.side_by_side``:
item 5's step, interleaved rounds, medians of 3) at N=300 streams of the
277-token text answer at 20 ms; goal: now / baseline <= 1.05x on each.
Without git, or without the commit (a shallow clone), the item prints a
row saying why.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from .common import ROOT, Row, env_with_root, log
from .scale import TOKENS
from .side_by_side import PRODUCER_MS, fmt_rounds, git, ratio_row, rounds, serve, tree_note, tree_state, uvicorn

__all__ = ["BASELINE", "ENV", "baseline_rev", "worktree", "imported_from", "run"]

ITEM = 15
BASELINE = "d5e0410"          # the commit before typed parts (tokenwire.core.parts)
ENV = "TOKENWIRE_BENCH_BASELINE"
FULL_N, QUICK_N = 300, 40
QUICK_TOKENS = 50
FULL_ROUNDS, QUICK_ROUNDS = 3, 1
GOAL = 1.05


def baseline_rev() -> str:
    return os.environ.get(ENV, "").strip() or BASELINE


class NoBaseline(Exception):
    """Why the baseline cannot be checked out (no git, no such commit, the worktree refused)."""


@contextmanager
def worktree(rev: str) -> Iterator[tuple[str, str]]:
    """Check ``rev`` out in a temporary detached worktree; yields (its path, the commit's short hash).

    The worktree and its directory are removed on the way out.  Raises
    ``NoBaseline`` saying why it cannot be made.
    """
    if shutil.which("git") is None:
        raise NoBaseline("git is not on the PATH")
    found = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if found.returncode != 0:
        raise NoBaseline(f"commit {rev!r} is not in the repository at {ROOT} (a shallow clone? "
                         f"git fetch --unshallow; or set {ENV})")
    commit = found.stdout.strip()
    parent = tempfile.mkdtemp(prefix="tokenwire-baseline-")
    path = os.path.join(parent, "tree")
    try:
        added = git("worktree", "add", "--detach", "--quiet", path, commit)
        if added.returncode != 0:
            raise NoBaseline(f"git worktree add failed: {added.stderr.strip()[-300:]}")
        yield path, commit[:7]
    finally:
        if os.path.isdir(path):
            git("worktree", "remove", "--force", path)
        shutil.rmtree(parent, ignore_errors=True)
        git("worktree", "prune")


def imported_from(cwd: str) -> str:
    """The ``tokenwire/__init__.py`` a server started in ``cwd`` imports (``tokenwire.asgi`` loaded too)."""
    out = subprocess.run([sys.executable, "-c", "import tokenwire, tokenwire.asgi; print(tokenwire.__file__)"],
                         cwd=cwd, env=env_with_root(), capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise NoBaseline(f"tokenwire does not import in {cwd}: {out.stderr.strip().splitlines()[-1:]}")
    return out.stdout.strip()


def run(quick: bool) -> list[Row]:
    missing = [m for m in ("uvicorn", "uvloop", "httptools") if importlib.util.find_spec(m) is None]
    if missing:
        return [Row(ITEM, "text answer now / baseline", "not run",
                    notes=(f"{', '.join(missing)} missing: pip install -e '.[bench]'",))]
    rev = baseline_rev()
    try:
        with worktree(rev) as (path, commit):
            return _measure(quick, path, commit, rev)
    except NoBaseline as exc:
        log(f"bench: item {ITEM}: not run: {exc}")
        return [Row(ITEM, f"text answer now / baseline {rev}", "not run", "", None, f"<= {GOAL:g}x", None,
                    (f"no baseline: {exc}",))]


def _measure(quick: bool, path: str, commit: str, rev: str) -> list[Row]:
    base_file, now_file = imported_from(path), imported_from(ROOT)
    if not base_file.startswith(path + os.sep):
        raise NoBaseline(f"a server started in the worktree imported {base_file}, not the baseline's code")
    n, tokens = (QUICK_N, QUICK_TOKENS) if quick else (FULL_N, TOKENS)
    count = QUICK_ROUNDS if quick else FULL_ROUNDS
    serve_now, serve_base = "serve now", f"serve {commit}"
    asgi_now, asgi_base = "tokenwire.asgi now", f"tokenwire.asgi {commit}"
    servers = [serve(serve_now, n), serve(serve_base, n, cwd=path),
               uvicorn(asgi_now, "tokenwire.asgi:app"), uvicorn(asgi_base, "tokenwire.asgi:app", cwd=path)]
    before = tree_state()
    done = rounds(ITEM, servers, n, tokens, count)
    now = tree_note(before)
    how = f"median of {count} rounds" if count > 1 else "1 round"
    label = rev if rev == commit else f"{rev} = {commit}"
    setup = (f"baseline {label}, a detached git worktree (removed after): its servers ran there and imported "
             f"{base_file}; now: {now}, importing {now_file}",
             f"N={n} streams of {tokens} tokens (the text answer) at {PRODUCER_MS:g} ms, item 5's client; serve as "
             "item 5 starts it, tokenwire.asgi:app on item 9's uvicorn command line; CPU per delivered token, "
             f"{how}, interleaved (every even round in reverse order)",
             *(f"{name}: {fmt_rounds(done, name)} us per token" for name in done.steps if done.ran(name)))
    return [ratio_row(ITEM, f"N={n} serve, text: now / {commit} ({how})", done, serve_now, serve_base, GOAL, setup),
            ratio_row(ITEM, f"N={n} ASGI app, text: now / {commit} ({how})", done, asgi_now, asgi_base, GOAL,
                      tuple(done.notes()))]
