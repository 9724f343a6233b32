"""What an import does, in a fresh interpreter: ``import tokenwire.asgi`` succeeds with any ``$TOKENWIRE_LOG_URL``
and opens no log, and a bad URL is one line at uvicorn's start-up; ``tokenwire.client`` without httpx names the
extra; the report function (``api/report.py``) loads none of what the live function needs.  (The canned app made
on first use, in this process: ``unit/test_asgi_first_use.py``.)"""

from __future__ import annotations

import os
import subprocess
import sys

from support.requirements import ROOT, free_port

BAD_URL = "mysql://user:hunter2@db:3306/x"
LINE = ("tokenwire.asgi:app: TOKENWIRE_LOG_URL must be 'memory' or a redis://, rediss://, unix://, "
        "redis+sentinel:// or rediss+sentinel:// URL, got 'mysql://user:***@db:3306/x'")


def _env(url: str) -> dict[str, str]:
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": pythonpath, "TOKENWIRE_LOG_URL": url}


def test_the_import_succeeds_with_a_bad_log_url() -> None:
    done = subprocess.run([sys.executable, "-c", "import tokenwire.asgi; from tokenwire.asgi import TokenStreams, app"],
                          cwd=ROOT, env=_env(BAD_URL), capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_the_import_opens_no_log() -> None:
    # A Redis URL: building the app would import the Redis log (and name a host nobody listens on).
    code = "import sys, tokenwire.asgi; print('tokenwire.redislog.blocking' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(f"redis://127.0.0.1:{free_port()}/0"),
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "False\n", "")


def test_uvicorn_with_a_bad_log_url_fails_at_start_up_with_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "uvicorn", "tokenwire.asgi:app", "--host", "127.0.0.1",
                           "--port", str(free_port()), "--log-level", "warning"],
                          cwd=ROOT, env=_env(BAD_URL), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3                              # uvicorn's status for a failed start-up
    assert done.stderr.splitlines() == [f"ERROR:    {LINE}", "ERROR:    Application startup failed. Exiting."]
    assert "hunter2" not in done.stderr + done.stdout


def test_without_httpx_the_import_error_names_the_extra() -> None:
    code = ("import sys; sys.modules['httpx'] = None\n"
            "try:\n import tokenwire.client\nexcept ImportError as e:\n print(e)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout == ("tokenwire.client needs httpx, which is not installed: "
                           "pip install 'tokenwire[client]'\n")


def test_the_report_function_does_not_load_what_the_live_function_needs() -> None:
    code = ("import sys; sys.path.insert(0, 'api'); import report; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'uvicorn', 'redis', 'hiredis', 'starlette', "
            "'fastapi', 'httpx'}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
