"""Who reads a stream, on every process: the readers' presence, so that an owner cancels only when none is left.

How this works: a process with a reader of a stream attached (a connection
reading it there, whether the process owns the stream or follows it) holds
an entry in the stream's ``readers`` sorted set: its owner id, scored with
when the entry runs out (Redis's clock, ``TIME``, in milliseconds).  It
joins when its first local reader attaches (``JOIN``, which also marks the
stream as read by someone, ``read`` in the meta), renews the entry with its
leases on the log writer's timer (``PRESENT_MANY``: a process that dies
stops renewing, and its entry runs out a lease later), and leaves when its
last local reader leaves (``LEAVE``).  The owner of a stream that cancels
when nobody reads it asks ``DESERTED``: the stream was read by someone and
no entry is live now.  A stream nobody has read yet is never deserted (its
owner starts the model at creation, before the first reader arrives).  The
readers key shares the stream's hash tag and gets its TTL back with the
entries.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["DESERTED", "JOIN", "LEAVE", "PRESENCE_SCRIPTS", "PRESENT_MANY", "ignored", "readers_key"]

# The milliseconds now on Redis's clock, and a readers set's live entries (the run-out ones dropped).
_NOW = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function live(readers)
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', now_ms())
  return redis.call('ZCARD', readers)
end
"""

# KEYS meta, readers; ARGV me, hold_ms, ttl_ms -> 1, or 0 for an unknown stream (its keys expired).
JOIN = _NOW + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], now_ms() + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('HSET', KEYS[1], 'read', 1)
return 1
"""

# KEYS meta, readers; ARGV me -> 1 if the stream is deserted now (as DESERTED), else 0.
LEAVE = _NOW + """
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('HGET', KEYS[1], 'read') == '1' and live(KEYS[2]) == 0 then return 1 end
return 0
"""

# KEYS meta, readers -> 1 if someone read the stream and no process has a reader attached now, else 0.
DESERTED = _NOW + """
if redis.call('HGET', KEYS[1], 'read') == '1' and live(KEYS[2]) == 0 then return 1 end
return 0
"""

# The renewal of this process's entries, on the writer's timer.  KEYS readers per stream; ARGV me, hold_ms,
# ttl_ms -> the number renewed.  An entry that ran out meanwhile is made again (the reader is still there).
PRESENT_MANY = _NOW + """
local expires = now_ms() + tonumber(ARGV[2])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], expires, ARGV[1])
  redis.call('PEXPIRE', KEYS[i], ARGV[3])
end
return #KEYS
"""

PRESENCE_SCRIPTS = {"join": JOIN, "leave": LEAVE, "deserted": DESERTED, "present_many": PRESENT_MANY}


def readers_key(meta_key: str) -> str:
    """The readers key of the stream whose meta key is ``meta_key`` (the same hash tag: the same slot)."""
    return meta_key.removesuffix("meta") + "readers"


def ignored(done: asyncio.Future[Any]) -> None:
    """The done callback of a call nobody waits for: its error is read (asyncio reports none) and dropped."""
    if not done.cancelled():
        done.exception()
