"""The live server: real sockets, streams that stay open, resume from ``Last-Event-ID``.

``server`` binds and runs it (``tokenwire serve``), ``routes`` answers each
request, ``params`` parses a live request, ``config`` holds its limits,
``registry`` the streams it serves, ``sockets`` the socket wire and kernel
figures, ``redislog`` and ``shared_stream`` the token log several instances
share.
"""

from .config import LiveConfig
from .registry import Registry
from .server import LiveServer, make_server

__all__ = ["LiveConfig", "LiveServer", "Registry", "make_server"]
