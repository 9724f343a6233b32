"""The live endpoints: request rules, the streams registry, and what each request gets, decided once for both servers.

No socket and no HTTP framing here (the adapters own those); what does
touch the event loop is named: ``writing`` runs an open stream's writer on
it, and the ``registry`` holds the server's loop driver, which runs the
producers, and a lock, since tools and tests read it from other threads.

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
