"""The live server: real sockets, streams that stay open, resume from ``Last-Event-ID``.

``command`` is ``tokenwire serve`` (flags, logger, banner), ``server``
binds and runs it, ``http`` reads one connection with h11, ``routes``
adapts each request to the endpoints (``tokenwire.endpoints``), ``pages``
renders report pages in worker processes, ``sockets`` holds the socket wire
and kernel figures.
"""

from ..endpoints.config import LiveConfig
from ..endpoints.registry import Registry
from .server import LiveServer, make_server

__all__ = ["LiveConfig", "LiveServer", "Registry", "make_server"]
