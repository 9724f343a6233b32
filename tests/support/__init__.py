"""What the tests share; no tests here.  ``tests/`` is on ``sys.path`` (pytest's rootdir-relative import of a
test directory without ``__init__.py``), so a test imports ``from support.live import serving``.

- ``requirements``: what a test needs from the machine (``require_binary``, ``require_node_package``,
  ``require_eventsource``...), each skipping the test with how to install it, or failing it under
  ``TOKENWIRE_REQUIRE_ALL=1`` (``skip_or_fail``); ``free_port``; ``ROOT``, the repository.
- ``processes``: a server process a test starts and stops (``wait_ready``, ``stop``).
- ``asgi``: a uvicorn process on loopback (``uvicorn("support.apps.chat:app")``, ``--app-dir tests``) and
  reading its streams with httpx-sse.
- ``live``: the in-process servers (``serving``, ``serving_report``, ``in_thread``), raw HTTP exchanges, and
  ``wait_until``, the bounded wait on a condition.
- ``redis``: a private ``redis-server`` per test or session (the fixtures ``conftest.py`` registers as a
  plugin) and the conditions a test waits for in Redis (``lease_expired``, ``until_logged``...).
- ``docs``: the README's and ``docs/``' text, found by heading or marker wherever a section lives.
- ``sse_vectors``: the SSE encoder and decoder vectors (plain data; ``bench/codec.py`` loads it by path).
- ``cutting_proxy``: a loopback TCP proxy that cuts every answer after a few hundred bytes.
- ``serverless_sim``: uvicorn instances on one ``redis-server`` behind ``haproxy``, each killed when its life
  is up (``PYTHONPATH=tests python -m support.serverless_sim`` runs it once by hand).
- ``chat_client.mjs``: the AI SDK's chat transports driven from node.
- ``apps``: the ASGI apps the tests serve with uvicorn (its own docstring lists them).
"""
