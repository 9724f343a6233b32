"""The live endpoints, sans-IO: request rules, the streams registry, and what each request gets.

``decisions`` is what goes in and what comes out, ``routes`` the one route
table (path, methods, body and its limit, action, error format), ``decide``
the ``Endpoints`` that decide (create, open, resume), ``access`` who may
(the ``authorize`` hook, a stream's principal), ``params`` parses a
live request and its ``Last-Event-ID``, ``rules`` holds the headers,
refusals and messages, ``writing`` an open stream's writer and heartbeat,
``page`` the live page and its files, ``config`` the limits, and
``registry`` the streams served.  The adapters (``tokenwire.live`` over h11,
``tokenwire.asgi`` over ASGI) translate a request in and a decision out.
"""
