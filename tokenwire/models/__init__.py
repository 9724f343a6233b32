"""The model contract: what a factory gets, what it may yield, and the adapters for the clients people use.

A room of its own that ``tokenwire.asgi`` and ``tokenwire.upstream`` both use.
"""
