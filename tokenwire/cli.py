"""The ``tokenwire`` command: ``report``, ``serve``, ``demo``, ``read`` and ``proxy``.

How this works: this module only picks the subcommand; each subcommand's
own module parses its flags (``tokenwire.report.render``, ``tokenwire.live.command``,
``tokenwire.demo.command``), so the flags of ``report`` are defined once, next to the
query-string parameters they mirror.  Bad usage exits 2 with one line on
stderr; nothing reaches the user as a traceback.

Every subcommand words a usage error the same way: a ``ParamError`` (the
report's flag parser raises it; ``FlagParser``, the argparse parser of the
other commands, raises it instead of printing its usage block), printed by
``usage_error`` as ``tokenwire COMMAND: <the line>``, exit 2 (``main``
does it for a ``ParamError`` a command lets through, so the report's
modules import nothing from here).
A value the flags parse but a setting refuses (``serve --grace-s -1``) is
worded by ``FlagParser.refusal`` as the report words it: the flag, the
rule, and the value as it was typed (``got '-1'``, never ``got -1.0``).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .report.params import ParamError

__all__ = ["FlagParser", "main", "usage_error"]

_COMMANDS = {
    "report": ("tokenwire.report.render", "print the report (text, json or html) for a scenario"),
    "serve": ("tokenwire.live.command", "serve the report and the live SSE endpoints on loopback"),
    "demo": ("tokenwire.demo.command", "stream the full answer over real loopback sockets and report"),
    "read": ("tokenwire.client.command", "print a stream's text as it comes, resuming by itself"),
    "proxy": ("tokenwire.upstream.command", "serve an OpenAI-compatible model server through tokenwire's routes"),
}

USAGE = "usage: tokenwire {report,serve,demo,read,proxy} [options]  (tokenwire COMMAND --help for each)"


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
        print(f"tokenwire: unknown command {args[0]!r}; expected one of {', '.join(_COMMANDS)}", file=sys.stderr)
        return 2
    try:
        entry: Callable[[list[str]], int] = importlib.import_module(command[0]).cli_main
    except ImportError as exc:                # an extra not installed (read: httpx): its message names it
        print(f"tokenwire {args[0]}: {exc}", file=sys.stderr)
        return 1
    try:
        return entry(args[1:])
    except ParamError as exc:                 # a command's usage error, worded here for every command
        return usage_error(args[0], exc)
    except KeyboardInterrupt:
        return 130


def usage_error(command: str, message: object) -> int:
    """Print ``tokenwire COMMAND: message`` on stderr (the one line of every usage error); returns 2."""
    print(f"tokenwire {command}: {message}", file=sys.stderr)
    return 2


# argparse's own words for a bad argument, and what they become (the report's wording).
_ARGUMENT = re.compile(r"argument (?P<flags>[^:]+): (?P<problem>.*)")
_BAD_TYPE = re.compile(r"invalid (?P<type>int|float) value: (?P<value>.*)")
_BAD_CHOICE = re.compile(r"invalid choice: (?P<value>.*) \(choose from (?P<choices>.*)\)")
_TYPES = {"int": "a whole number", "float": "a number"}
# A setting refused by the layer that checks it: ``max_live must be a positive int, got 0`` (or ``--name``).
_REFUSAL = re.compile(r"(?P<name>(?:--)?[a-z][a-z0-9_-]*) (?P<rule>must .*?)[,;] got (?P<value>.*)", re.S)


class FlagParser(argparse.ArgumentParser):
    """argparse for a subcommand's flags whose errors raise ``ParamError`` with one line, never usage and exit.

    No abbreviated flags (as ``tokenwire report``): a flag is named whole.
    """

    def __init__(self, prog: str, description: str) -> None:
        super().__init__(prog=prog, description=description, allow_abbrev=False)

    def error(self, message: str) -> NoReturn:
        raise ParamError(self._one_line(message))

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        """``parse_args``, but an unknown flag is named before anything else is said of the rest.

        argparse checks the required arguments first, so ``proxy --bogus`` would
        say that ``--upstream`` is missing, not that ``--bogus`` is no flag.
        """
        known = {option for action in self._actions for option in action.option_strings}
        for arg in argv:
            if arg == "--":
                break
            if arg.startswith("--") and arg.partition("=")[0] not in known:
                self.error(f"unrecognized arguments: {arg}")
        return self.parse_args(argv)

    def _one_line(self, message: str) -> str:
        if message.startswith("unrecognized arguments: "):
            stray = message.split(": ", 1)[1].split()[0]
            if stray.startswith("-"):
                return f"unknown flag {stray.partition('=')[0]!r}; allowed: {', '.join(self._flags())}"
            return f"unexpected argument {stray!r}; flags look like --name value (see --help)"
        argument = _ARGUMENT.fullmatch(message)
        if argument is None:
            return f"{message} (see --help)"
        flag, problem = argument["flags"].split("/")[-1], argument["problem"]
        if problem == "expected one argument":
            return f"flag {flag} needs a value"
        if bad := _BAD_TYPE.fullmatch(problem):
            return f"{flag} must be {_TYPES[bad['type']]}; got {bad['value']}"
        if bad := _BAD_CHOICE.fullmatch(problem):
            return f"{flag} must be one of {bad['choices'].replace(chr(39), '')}; got {bad['value']}"
        return f"{flag}: {problem}"

    def refusal(self, message: str, argv: Sequence[str]) -> str:
        """``message``, a setting's refusal (``grace_s must be ..., got -1.0``), as the person who typed the
        flag knows it: the flag named, the number as typed (``--grace-s must be ...; got '-1'``).

        A text flag keeps the value the message quotes (it may hide a password); a message about something
        not typed as a flag here is returned as it is.
        """
        refused = _REFUSAL.fullmatch(message)
        if refused is None:
            return message
        dest = refused["name"].lstrip("-").replace("-", "_")
        action = next((a for a in self._actions if a.dest == dest and a.option_strings), None)
        typed = None if action is None else _typed(action.option_strings, argv)
        if action is None or typed is None:
            return message
        value = repr(typed) if action.type in (int, float) else refused["value"]
        return f"{action.option_strings[-1]} {refused['rule']}; got {value}"

    def _flags(self) -> list[str]:
        return [option for action in self._actions for option in action.option_strings
                if option.startswith("--") and option != "--help"]


def _typed(flags: Sequence[str], argv: Sequence[str]) -> str | None:
    """The text last typed for one of ``flags`` in ``argv`` (``--name value`` or ``--name=value``), or None."""
    typed = None
    for at, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in flags:
            typed = value if eq else argv[at + 1] if at + 1 < len(argv) else None
    return typed
