"""The token log on Redis: several processes share streams (``redis`` extra)."""
