"""Which event loop a server runs on: uvloop's when it is installed, unless ``TOKENWIRE_LOOP`` says ``asyncio``.

How this works: ``loop_name`` reads the environment once per call and
imports uvloop only to learn whether it is there; ``new_loop`` makes a
loop of that kind.  A run that owns its thread makes its own loop instead
(``private``).
"""

from __future__ import annotations

import asyncio
import os

__all__ = ["LOOP_ENV", "loop_name", "new_loop"]

# Which loop new_loop() makes: "uvloop" (the default when installed) or "asyncio".
LOOP_ENV = "TOKENWIRE_LOOP"


def loop_name() -> str:
    """The loop ``new_loop`` makes: ``uvloop`` if installed and not refused by ``TOKENWIRE_LOOP``, else ``asyncio``."""
    wanted = os.environ.get(LOOP_ENV, "uvloop")
    if wanted not in ("uvloop", "asyncio"):
        raise ValueError(f"{LOOP_ENV} must be 'uvloop' or 'asyncio', got {wanted!r}")
    if wanted == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            return "asyncio"
    return wanted


def new_loop() -> asyncio.AbstractEventLoop:
    """Return a new event loop (uvloop's when ``loop_name()`` says so)."""
    if loop_name() == "uvloop":
        import uvloop
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()
