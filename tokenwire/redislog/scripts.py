"""The Redis token log's Lua scripts, and what their replies mean (for the log and its asyncio twin).

How this works: every write is one script, so "check the lease, check the
index, XADD, re-arm the TTLs" is atomic on the server.  The functions below
turn a script's (or a pipeline's) reply into a value or the core's
``LogError``; ``RedisTokenLog`` (redis-py) and ``AsyncRedisLog``
(redis.asyncio) send the same scripts and read the replies here, so the two
cannot disagree.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.tokenlog import IndexConflict, LeaseLost, LogGap, UnknownStream

__all__ = ["APPEND", "APPEND_MANY", "CLAIM", "CREATE", "READ", "RELEASE", "RENEW_MANY", "SCRIPTS", "SET_STATE", "Claim",
           "appended", "claimed", "create_args", "created", "entry_index", "followed", "tokens_read"]


@dataclass(frozen=True, slots=True)
class Claim:
    """The answer to a lease claim: ``owned`` (this instance may generate), the log's ``length``, the ``owner``."""

    owned: bool
    length: int
    owner: str


# KEYS meta, tokens, lease; ARGV params, total, ttl_ms, creator.  Idempotent:
# the same creator asking again (redis-py retries a command whose reply was
# lost, so the script may run twice) is told it succeeded.
CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'creator') == ARGV[4] then return 1 end
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'params', ARGV[1], 'total', ARGV[2], 'length', 0, 'state', 'generating', 'creator', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

# KEYS meta, lease; ARGV owner, hold_ms -> {owned 0/1 or -1 unknown, length, owner}.
# Taking a free lease marks the stream generating (it may have been cancelled by the last owner).
CLAIM = """
local len = redis.call('HGET', KEYS[1], 'length')
if not len then return {-1, 0, ''} end
local o = redis.call('GET', KEYS[2])
if o == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return {1, tonumber(len), o}
end
if o then return {0, tonumber(len), o} end
if redis.call('HGET', KEYS[1], 'state') == 'done' then return {0, tonumber(len), ''} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[1], 'state', 'generating')
return {1, tonumber(len), ARGV[1]}
"""

# KEYS meta, tokens, lease; ARGV owner, index, token, maxlen, ttl_ms, lease_ms
APPEND = """
local len = redis.call('HGET', KEYS[1], 'length')
if not len then return {'unknown', 0} end
len = tonumber(len)
local index = tonumber(ARGV[2])
local o = redis.call('GET', KEYS[3])
if o and o ~= ARGV[1] then return {'lease', o} end
if index ~= len or index >= tonumber(redis.call('HGET', KEYS[1], 'total')) then
  if index < len then
    local id = '0-' .. (index + 1)
    local e = redis.call('XRANGE', KEYS[2], id, id)
    if #e == 1 and e[1][2][2] == ARGV[3] and e[1][2][4] == ARGV[1] then return {'ok', len} end
  end
  return {'conflict', len}
end
if not o then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[6]) end
redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[4], '0-' .. (index + 1), 't', ARGV[3], 'by', ARGV[1])
redis.call('HSET', KEYS[1], 'length', index + 1)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('PEXPIRE', KEYS[3], ARGV[6])
return {'ok', index + 1}
"""

# KEYS meta, tokens, lease; ARGV owner, state, ttl_ms -> the state now stored ('' if unknown).
# done is final; cancelled is ignored while another instance holds the lease
# (the stream is still generating there); done/cancelled release our lease.
SET_STATE = """
local cur = redis.call('HGET', KEYS[1], 'state')
if not cur then return '' end
if cur == 'done' then return cur end
local o = redis.call('GET', KEYS[3])
if ARGV[2] == 'cancelled' and o and o ~= ARGV[1] then return cur end
redis.call('HSET', KEYS[1], 'state', ARGV[2])
if ARGV[2] ~= 'generating' and o == ARGV[1] then redis.call('DEL', KEYS[3]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return ARGV[2]
"""

# The group commit: one call carries a round's appends, each fenced by its own stream's lease and next index.
# KEYS meta, tokens, lease per append; ARGV owner, maxlen, lease_ms, ttl_ms, then index, token per append
# -> one reply per append: {'ok', length} | {'lease', owner} | {'conflict', length} | {'unknown', 0}.
# The TTLs are re-armed by the lease renewal (RENEW_MANY), not here (the per-token path); the tokens key
# gets its first TTL with its first entry.
APPEND_MANY = """
local out = {}
local owner = ARGV[1]
for i = 0, #KEYS / 3 - 1 do
  local meta, tokens, lease = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  local index, token = tonumber(ARGV[5 + 2 * i]), ARGV[6 + 2 * i]
  local len = redis.call('HGET', meta, 'length')
  local o = redis.call('GET', lease)
  if not len then
    out[i + 1] = {'unknown', 0}
  elseif o and o ~= owner then
    out[i + 1] = {'lease', o}
  else
    len = tonumber(len)
    if index == len and index < tonumber(redis.call('HGET', meta, 'total')) then
      if not o then redis.call('SET', lease, owner, 'PX', ARGV[3]) end
      redis.call('XADD', tokens, 'MAXLEN', ARGV[2], '0-' .. (index + 1), 't', token, 'by', owner)
      if index == 0 then redis.call('PEXPIRE', tokens, ARGV[4]) end
      redis.call('HSET', meta, 'length', index + 1)
      out[i + 1] = {'ok', index + 1}
    else
      local e = {}
      if index < len then e = redis.call('XRANGE', tokens, '0-' .. (index + 1), '0-' .. (index + 1)) end
      if #e == 1 and e[1][2][2] == token and e[1][2][4] == owner then
        out[i + 1] = {'ok', len}              -- a retried round that already landed
      else
        out[i + 1] = {'conflict', len}
      end
    end
  end
end
return out
"""

# The owner's leases, renewed together on a timer; each stream's keys get their TTL back too.
# KEYS meta, tokens, lease per stream; ARGV owner, lease_ms, ttl_ms -> 1 (held) or 0 (lost) per stream.
# A lease that ran out while nobody took it (Redis stalled past it) is taken again while the stream generates.
RENEW_MANY = """
local out = {}
for i = 0, #KEYS / 3 - 1 do
  local meta, tokens, lease = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  local o = redis.call('GET', lease)
  local held = 0
  if o == ARGV[1] then
    redis.call('PEXPIRE', lease, ARGV[2])
    held = 1
  elseif not o and redis.call('HGET', meta, 'state') == 'generating' then
    redis.call('SET', lease, ARGV[1], 'PX', ARGV[2])
    held = 1
  end
  if held == 1 then
    redis.call('PEXPIRE', meta, ARGV[3])
    redis.call('PEXPIRE', tokens, ARGV[3])
  end
  out[i + 1] = held
end
return out
"""

# A resume read in one atomic call. KEYS meta, tokens; ARGV cursor, limit (-1: all)
# -> {length or false, first kept entry (or {}), entries after the cursor}.
READ = """
local len = redis.call('HGET', KEYS[1], 'length')
if not len then return {false, {}, {}} end
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
local rest = {}
local limit = tonumber(ARGV[2])
if limit ~= 0 then
  local start = '(0-' .. (tonumber(ARGV[1]) + 1)
  if limit < 0 then rest = redis.call('XRANGE', KEYS[2], start, '+')
  else rest = redis.call('XRANGE', KEYS[2], start, '+', 'COUNT', limit) end
end
return {len, first, rest}
"""

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


# Every script by name: the log loads them once per connection and calls them by their SHA1.
SCRIPTS = {"create": CREATE, "claim": CLAIM, "append": APPEND, "append_many": APPEND_MANY, "set_state": SET_STATE,
           "release": RELEASE, "renew_many": RENEW_MANY, "read": READ}


def create_args(meta: Mapping[str, Any], total: int, ttl_ms: int, owner_id: str) -> list[Any]:
    """The create script's arguments; a fresh creator token per call, so a retry of this call is recognised."""
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise ValueError(f"total must be a non-negative int, got {total!r}")
    return [json.dumps(dict(meta)), total, ttl_ms, f"{owner_id}/{secrets.token_hex(6)}"]


def created(stream_id: str, made: Any) -> None:
    if not made:
        raise ValueError(f"stream {stream_id!r} already exists")


def appended(stream_id: str, index: int, status: str, value: Any) -> None:
    if status == "ok":
        return
    if status == "lease":
        raise LeaseLost(stream_id, str(value))
    if status == "conflict":
        raise IndexConflict(stream_id, index, int(value))
    raise UnknownStream(stream_id)


def tokens_read(stream_id: str, cursor: int, replies: list[Any]) -> list[str]:
    """The tokens of a read's replies (length, first kept entry, the range asked for; ``READ``'s reply)."""
    length, first, *rest = replies
    if length is None:
        raise UnknownStream(stream_id)
    first_kept = entry_index(first[0][0]) if first else int(length)
    if cursor + 1 < first_kept:
        raise LogGap(stream_id, cursor, first_kept)
    return [_text(fields) for _, fields in rest[0]] if rest else []


def _text(fields: Any) -> str:
    """An entry's token: its ``t`` field (a dict from redis-py, a flat list from a script: ``t`` comes first)."""
    return str(fields["t"] if isinstance(fields, dict) else fields[1])


def claimed(stream_id: str, reply: Any) -> Claim:
    owned, length, owner = reply
    if owned == -1:
        raise UnknownStream(stream_id)
    return Claim(owned == 1, int(length), str(owner))


def followed(reply: Any, tokens_key: str) -> list[tuple[int, str]]:
    if not reply:
        return []
    entries = reply[tokens_key] if isinstance(reply, dict) else reply[0][1]
    return [(entry_index(entry_id), fields["t"]) for entry_id, fields in entries]


def entry_index(entry_id: str) -> int:
    """The token index of a stream entry id (``0-(i+1)`` is token ``i``)."""
    return int(entry_id.partition("-")[2]) - 1
