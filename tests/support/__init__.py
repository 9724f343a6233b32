"""What the tests share; no tests here.  ``tests/`` is on ``sys.path`` for a test in any folder
(``pythonpath`` in ``pyproject.toml``), so a test imports ``from support.live import serving``; a test file
never imports another (what two share lives here).

- ``requirements``: what a test needs from the machine (``require_binary``, ``require_node_package``,
  ``require_eventsource``...), each skipping the test with how to install it, or failing it under
  ``TOKENWIRE_REQUIRE_ALL=1`` (``skip_or_fail``); ``free_port``; ``ROOT``, the repository.
- ``processes``: a server process a test starts and stops (``wait_ready``, ``stop``).
- ``served``: ``tokenwire serve`` as a process to read line by line and look at in ``/proc`` (``served``), or on a
  chosen event loop with its stderr kept as it comes (``serve``).
- ``instances``: ``tokenwire serve`` processes on one shared log (``Instance``), a raw loopback request to them, and
  which instance generated each index, read back from Redis (``owners``, ``runs``).
- ``tokenwire_process``: any ``python -m tokenwire`` command as a process, its transcript and CPU time.
- ``private_loop``: a core stream served to a reader on a private event-loop driver of its own thread.
- ``asgi``: a uvicorn process on loopback (``uvicorn("support.apps.chat:app")``, ``--app-dir tests``) and
  reading its streams with httpx-sse; ``asgi_thread``: an ASGI app under uvicorn in a thread of this process.
- ``live``: the in-process servers (``serving``, ``serving_report``, ``in_thread``), raw HTTP exchanges (and
  ``read_request``, what a test's own loopback server reads of one), and ``wait_until``, the bounded wait on a
  condition.
- ``models``: model factories the tests serve with ``TokenStreams`` (``yielding``: a stream of given items).
- ``redis``: a private ``redis-server`` per test or session (the fixtures ``conftest.py`` registers as a
  plugin), the conditions a test waits for in Redis (``lease_expired``, ``until_logged``...) and ``run_scene``;
  ``redis_tls``: a redis-server that wants a client certificate; ``sentinel``: a primary, two replicas and
  three ``redis-sentinel``s watching them (``running_sentinels``), for failovers.
- ``cdp``: a headless Chromium driven over the DevTools pipe (``browser_page``) and axe-core (``axe``).
- ``docs``: the README's and ``docs/``' text, found by heading or marker wherever a section lives.
- ``sse_vectors``: the SSE encoder and decoder vectors (plain data; ``bench/codec.py`` loads it by path);
  ``sse_reference``: the WHATWG reference the decoder is held to, and the property and fuzz tests' inputs.
- ``credentials``: credentials as requests carry them, for the tests that none is shown, logged or kept.
- ``cutting_proxy``: a loopback TCP proxy that cuts every answer after a few hundred bytes;
  ``misbehaving_upstream``: an OpenAI-compatible upstream that misbehaves; ``endless_event``: a server whose
  event never ends.
- ``serverless_sim``: uvicorn instances on one ``redis-server`` behind ``haproxy``, each killed when its life
  is up (``PYTHONPATH=tests python -m support.serverless_sim`` runs it once by hand).
- ``chat_client.mjs``, ``chat_parts_client.mjs``: the AI SDK's chat transports driven from node.
- ``apps``: the ASGI apps the tests serve with uvicorn (its own docstring lists them).
"""
