"""Vercel's entry point: ``/api/report`` (and ``/`` through the rewrite in vercel.json)."""

from tokenwire.handler import handler

__all__ = ["handler"]
