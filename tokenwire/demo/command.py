"""``tokenwire demo``: its flags, its progress lines on stderr, and the command itself.

How this works: the flags are the report's parameters the demo lets you
change (checked here, one line on stderr and exit 2 when bad) and the kernel
buffers to ask for; ``run_demo`` does the measuring and ``demo_report``
lays the report out.  SIGTERM and SIGINT stop the run as an exception
would: its server shuts down and the interpreter exits normally, so what
the server's page pools hold (semaphores the resource tracker watches) is
released, and the exit status is the shell's ``128 + signal``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import replace

from ..cli import FlagParser, usage_error
from ..live.sockets import MAX_BUFFER_BYTES
from ..report.params import MAX_BUFFER, MAX_READER_MS, cut_after_message
from ..report.plan import DEMO_PARAMS, demo_estimate_s
from .runs import CONNECTIONS, DEMO_RCVBUF, DEMO_SNDBUF, DemoSettings, demo_report, run_demo

__all__ = ["cli_main"]


def _parser() -> FlagParser:
    d = DEMO_PARAMS
    parser = FlagParser("tokenwire demo", (
        "Stream the full answer over five connections on real loopback sockets (baseline, block, drop-newest, "
        "a cut, the resume) with a slow reader, then print the report measured over sockets."))
    parser.add_argument("--format", choices=("text", "json"), default="text", help="report format (default text)")
    parser.add_argument("--reader-ms", type=float, default=d.reader_ms,
                        help=f"the slow reader's time per token (default {d.reader_ms:g})")
    parser.add_argument("--buffer", type=int, default=d.buffer,
                        help=f"channel slots for the slow runs (default {d.buffer})")
    parser.add_argument("--cut-after", type=int, default=d.cut_after,
                        help=f"tokens the reader takes before it hangs up (default {d.cut_after})")
    parser.add_argument("--sndbuf", type=int, default=DEMO_SNDBUF,
                        help=f"SO_SNDBUF asked for on the server's stream sockets, 0 for the kernel's "
                             f"(default {DEMO_SNDBUF})")
    parser.add_argument("--rcvbuf", type=int, default=DEMO_RCVBUF,
                        help=f"SO_RCVBUF asked for on the reader's sockets, 0 for the kernel's (default {DEMO_RCVBUF})")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def _settings(args: argparse.Namespace) -> DemoSettings:
    if not 0 <= args.reader_ms <= MAX_READER_MS:
        raise ValueError(f"--reader-ms must be from 0 to {MAX_READER_MS:g}, got {args.reader_ms!r}")
    if not 1 <= args.buffer <= MAX_BUFFER:
        raise ValueError(f"--buffer must be from 1 to {MAX_BUFFER}, got {args.buffer!r}")
    if not 0 <= args.cut_after < DEMO_PARAMS.tokens:
        raise ValueError(cut_after_message(DEMO_PARAMS.tokens, str(args.cut_after), label="--cut-after"))
    for name in ("sndbuf", "rcvbuf"):
        if not 0 <= getattr(args, name) <= MAX_BUFFER_BYTES:
            raise ValueError(f"--{name} must be 0 (the kernel's) or a number of bytes up to {MAX_BUFFER_BYTES}, "
                             f"got {getattr(args, name)!r}")
    # The report's parameters hold times to 6 decimals, as its query strings do.
    params = replace(DEMO_PARAMS, format=args.format, reader_ms=round(args.reader_ms, 6), buffer=args.buffer,
                     cut_after=args.cut_after)
    return DemoSettings(params, sndbuf=args.sndbuf or None, rcvbuf=args.rcvbuf or None)


class _Progress:
    """One line per connection on stderr, redrawn in place on a terminal."""

    def __init__(self, stream: object) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.current: str | None = None
        self.count = 0
        self.started = time.monotonic()

    def __call__(self, name: str, taken: int, total: int) -> None:
        if name != self.current:
            self.finish()
            self.current, self.count, self.started = name, 0, time.monotonic()
        self.count = taken
        if self.tty and (taken % 10 == 0 or taken == total):
            self._write("\r" + self._line(total), end="")

    def _line(self, total: int) -> str:
        index = CONNECTIONS.index(self.current or CONNECTIONS[0]) + 1
        return (f"[{index}/{len(CONNECTIONS)}] {self.current:<12} {self.count:>3} tokens read"
                f"  {time.monotonic() - self.started:5.2f} s")

    def finish(self) -> None:
        if self.current is not None:
            self._write(("\r" if self.tty else "") + self._line(0))
        self.current = None

    def _write(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self.stream, flush=True)  # type: ignore[call-overload]


class _Stopped(Exception):
    """SIGTERM or SIGINT arrived during the run."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGINT raise ``_Stopped`` once (a second one acts as it would have); restored on exit."""
    stops = (signal.SIGTERM, signal.SIGINT)

    def stop(signum: int, frame: object) -> None:
        for number in stops:
            signal.signal(number, signal.SIG_DFL)
        raise _Stopped(signum)

    before = {number: signal.signal(number, stop) for number in stops}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def cli_main(argv: list[str]) -> int:
    """Run ``tokenwire demo``; returns the exit status (2 for bad usage, 128 + the signal that stopped it)."""
    parser = _parser()
    try:
        args = parser.parse(argv)
        settings = _settings(args)
    except ValueError as exc:                 # a ParamError from the flags, or a bad setting
        return usage_error("demo", parser.refusal(str(exc), argv))
    progress = None if args.quiet else _Progress(sys.stderr)
    params = settings.params
    if progress is not None:
        print(f"tokenwire demo: {params.tokens} tokens, {len(CONNECTIONS)} connections over 127.0.0.1, a "
              f"{params.reader_ms:g} ms reader, about {demo_estimate_s(params):g} s; progress on stderr",
              file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        with _stopped_by_signals():
            measured = run_demo(settings, progress)
    except _Stopped as stop:
        if progress is not None:
            progress.finish()
            print(f"tokenwire demo: stopped by {signal.Signals(stop.signum).name}", file=sys.stderr, flush=True)
        return 128 + stop.signum
    if progress is not None:
        progress.finish()
    sys.stdout.write(demo_report(settings, measured, time.monotonic() - started).decode())
    sys.stdout.flush()
    return 0
