"""The ``tokenwire`` command: ``report``, ``serve`` and ``demo``.

How this works: this module only picks the subcommand; each subcommand's
own module parses its flags (``tokenwire.report.render``, ``tokenwire.live.server``,
``tokenwire.demo.command``), so the flags of ``report`` are defined once, next to the
query-string parameters they mirror.  Bad usage exits 2 with one line on
stderr; nothing reaches the user as a traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

__all__ = ["main"]

_COMMANDS = {
    "report": ("tokenwire.report.render", "print the report (text, json or html) for a scenario"),
    "serve": ("tokenwire.live.server", "serve the report and the live SSE endpoints on loopback"),
    "demo": ("tokenwire.demo.command", "stream the full answer over real loopback sockets and report"),
}

USAGE = "usage: tokenwire {report,serve,demo} [options]  (tokenwire COMMAND --help for each)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        for name, (_, about) in _COMMANDS.items():
            print(f"  {name:<7} {about}")
        return 0 if args else 2
    if args[0] == "--version":
        from . import __version__
        print(f"tokenwire {__version__}")
        return 0
    command = _COMMANDS.get(args[0])
    if command is None:
        print(f"tokenwire: unknown command {args[0]!r}; expected one of report, serve, demo", file=sys.stderr)
        return 2
    entry: Callable[[list[str]], int] = getattr(importlib.import_module(command[0]), "cli_main")
    try:
        return entry(args[1:])
    except KeyboardInterrupt:
        return 130
