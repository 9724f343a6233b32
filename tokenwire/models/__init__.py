"""The model contract: what a model factory is called with, what it may yield, and the adapters that turn the
objects of the clients people use (the openai SDK, anthropic, LangChain) into tokenwire's parts.

Both the ASGI app (``tokenwire.asgi``) and the proxy (``tokenwire.upstream``) build on this package; it imports
none of those clients: an adapter is chosen by the yielded object's module name, so a package is imported only
when its objects are yielded.
"""

from __future__ import annotations

from .request import MAX_MODEL_TOKENS, ModelFactory, ModelFailure, StreamRequest, Tokens
from .yields import MAX_ANSWER_BYTES, MAX_ENTRY_BYTES, ModelParts, token_problem

__all__ = ["MAX_ANSWER_BYTES", "MAX_ENTRY_BYTES", "MAX_MODEL_TOKENS", "ModelFactory", "ModelFailure", "ModelParts",
           "StreamRequest", "Tokens", "token_problem"]
