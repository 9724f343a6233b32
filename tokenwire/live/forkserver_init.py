"""The page processes' fork server imports this first (``Pages`` sets it as the preload): it dies with the server.

Importing this module asks Linux to SIGKILL the importing process when its
parent dies (``pages.preload_fork_server``), so only the fork server, whose parent
is the server, may import it.  Its workers ask the same of it in turn.  It
also ignores SIGINT from then on, before multiprocessing notes the handlers
its workers get back: a terminal's Ctrl-C reaches the whole process group,
and the server alone decides what it means.
"""

from __future__ import annotations

import os

from .pages import SERVER_PID_ENV, preload_fork_server

__all__: list[str] = []

_server = os.environ.get(SERVER_PID_ENV, "")
if _server.isdigit():
    preload_fork_server(int(_server))
