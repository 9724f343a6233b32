"""The real-time driver: the core's processes stepped by one asyncio event loop, in one thread.

How this works, one module per responsibility:

- ``driver``: ``LoopDriver``, the interpreter of effects (the simulation's
  twin in real time); what a ``Put``/``Get`` does is the core's
  ``exchange``, shared with the simulation.
- ``lanes``: the per-token path, a producer's tokens the driver takes
  itself (a canned answer's ``Run``, a shared log's ``RunLogged``).
- ``timers``: deadline timers (one loop timer per 1 ms tick for a
  server's deadlines; a ``precise`` mode that spins the last stretch).
- ``held``: a turn's socket writes, held until its tokens are made, then
  written back to back (a write wakes its reader, who would take the core).
- ``parking``: processes waiting on a stream, retried when its notifier rings.
- ``wires``: ``LoopWire``, the protocol a socket's or an ASGI response's wire
  implements, told apart from an in-memory ``Wire`` once per process.
- ``procs``: the state the driver keeps per process.
- ``private``: the loop a run that owns its thread runs on (``LoopDriver.private()``).
- ``loops``: which loop a server makes (``new_loop``: uvloop's when the
  ``fast`` extra is installed and ``TOKENWIRE_LOOP`` does not say ``asyncio``).
"""

from .driver import LoopDriver
from .loops import LOOP_ENV, loop_name, new_loop
from .wires import LoopWire

__all__ = ["LOOP_ENV", "LoopDriver", "LoopWire", "loop_name", "new_loop"]
