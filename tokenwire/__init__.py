"""tokenwire: what an LLM token stream really sends over Server-Sent Events.

The sans-IO core lives in ``tokenwire.core``; the edges (CLI, HTTP handler,
live server) are thin drivers over it.
"""

__version__ = "0.1.0"
