"""tokenwire: what an LLM token stream really sends over Server-Sent Events.

The sans-IO core lives in ``tokenwire.core``; the edges (the CLI, the
serverless handler, the h11 live server and the ASGI app over one endpoint
layer, ``tokenwire.endpoints``) are thin drivers over it.
"""

__version__ = "0.1.0"
