"""The ASGI apps the tests serve with uvicorn, as ``support.apps.<module>:app``; no tests here.

- ``parts``: what the apps share: ``counting``, a model that records each call, and ``prefix_app``, mounts
  without a framework.
- ``fake_model``: a FastAPI app with a fake model steered by its query (``app``, ``live``, ``detached``).
- ``bad_tokens``: a model that yields a lone surrogate (a token with no UTF-8 encoding).
- ``auth``: ``authorize`` hooks reading a bearer token.
- ``chat``: a chat model and the canned answer for ``POST /chat``.
- ``cors``: ``examples/deploy.py`` as it is, plus an open mount.
- ``eviction``: a continued model whose tokens name the factory call that made them.
- ``openai_wire``: the canned answer and a model that reads the OpenAI request.
- ``routes``: a route table with routes added.
- ``serverless``: continued and ended models and the canned answer, for the continuation and serverless tests.
- ``upstream_standin``: an OpenAI-compatible model server, with every way to fail, for ``tokenwire proxy``.
"""
