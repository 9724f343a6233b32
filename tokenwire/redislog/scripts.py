"""The Redis token log's Lua scripts, and what their replies mean.

How this works: every write is one script, so "check the lease, check the
index, XADD" is atomic on the server (the TTLs are re-armed by RENEW_MANY,
on the owner's renewal timer).  The functions below turn a script's reply
into a value or the core's ``LogError``, for ``AsyncRedisLog``, the one
implementation (``RedisTokenLog`` runs its coroutines).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.tokenlog import IndexConflict, LeaseLost, LogGap, UnknownStream

__all__ = ["APPEND_MANY", "CLAIM", "CREATE", "INFO", "READ", "RELEASE", "RENEW_MANY", "SCRIPTS", "SET_STATE",
           "TAKE_OVER", "Claim", "appended", "claimed", "create_args", "created", "entry_index",
           "tokens_read"]


@dataclass(frozen=True, slots=True)
class Claim:
    """The answer to a lease claim: ``owned`` (this instance may generate), the log's ``length``, the ``owner``."""

    owned: bool
    length: int
    owner: str


# A stream's length (the next index) is its last entry's id, ``0-<length>``: no counter is written per token.
_LENGTH = """
local function length(tokens)
  local e = redis.call('XREVRANGE', tokens, '+', '-', 'COUNT', 1)
  if #e == 0 then return 0 end
  return tonumber(string.sub(e[1][1], 3))
end
"""

# KEYS meta, tokens, lease; ARGV params, total, ttl_ms, creator.  Idempotent:
# the same creator asking again (a round sent twice after a reconnect) is told it succeeded.
CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'creator') == ARGV[4] then return 1 end
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'params', ARGV[1], 'total', ARGV[2], 'state', 'generating', 'creator', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

# KEYS meta, tokens, lease; ARGV owner, hold_ms -> {owned 0/1 or -1 unknown, length, owner}.
# Taking a free lease marks the stream generating (it may have been cancelled by the last owner).
CLAIM = _LENGTH + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0, ''} end
local len = length(KEYS[2])
local o = redis.call('GET', KEYS[3])
if o == ARGV[1] then
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
  return {1, len, o}
end
if o then return {0, len, o} end
if redis.call('HGET', KEYS[1], 'state') == 'done' then return {0, len, ''} end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[1], 'state', 'generating')
return {1, len, ARGV[1]}
"""

# A continuation's claim: take a free lease only while the stream is still generating (a stopped or finished
# stream stays as its owner left it).  KEYS meta, tokens, lease; ARGV owner, hold_ms -> as CLAIM.
TAKE_OVER = _LENGTH + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0, ''} end
local len = length(KEYS[2])
local o = redis.call('GET', KEYS[3])
if o then return {o == ARGV[1] and 1 or 0, len, o} end
if redis.call('HGET', KEYS[1], 'state') ~= 'generating' then return {0, len, ''} end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
return {1, len, ARGV[1]}
"""

# KEYS meta, tokens; -> {params, total, length, state}, or nil for an unknown stream.
INFO = _LENGTH + """
local m = redis.call('HMGET', KEYS[1], 'params', 'total', 'state')
if not m[1] then return nil end
return {m[1], m[2], length(KEYS[2]), m[3]}
"""

# The group commit: one call carries a round's appends, each fenced by its own stream's lease.
# KEYS every append's tokens key, then every append's lease key (in the same order); ARGV owner, maxlen,
# ttl_ms, then entry id (0-<index+1>), token per append
# -> the appends refused, flat: position (from 0), status, value for each ({} when all are logged), where
# status, value is 'lease', owner | 'conflict', length | 'unknown', 0.
# One MGET reads every lease of the round (the script is atomic: no lease changes while it runs); then the
# lease holder's path is one command per append, XADD with the explicit id (which Redis refuses for a taken
# index); the stream is trimmed to MAXLEN by the lease renewal.  Without the
# lease, or when the XADD is refused, every check is made (on the stream's meta key, the tokens key's
# sibling in the same hash slot): the stream exists, the index is the next one and within the total,
# or it is a retried append that already landed (same token, same owner).  The TTLs are re-armed by
# the renewal (RENEW_MANY), not here; the tokens key gets its first TTL with its first entry.
APPEND_MANY = _LENGTH + """
local owner, maxlen = ARGV[1], ARGV[2]
local function checked(tokens, id, token)
  local meta = string.sub(tokens, 1, -7) .. 'meta'
  if redis.call('EXISTS', meta) == 0 then return {'unknown', 0} end
  local index, len = tonumber(string.sub(id, 3)) - 1, length(tokens)
  if index == len and index < tonumber(redis.call('HGET', meta, 'total')) then
    redis.call('XADD', tokens, 'MAXLEN', maxlen, id, 't', token, 'by', owner)
    if index == 0 then redis.call('PEXPIRE', tokens, ARGV[3]) end
    return 0
  end
  if index < len then
    local e = redis.call('XRANGE', tokens, id, id)
    if #e == 1 and e[1][2][2] == token and e[1][2][4] == owner then return 0 end
  end
  return {'conflict', len}
end
local out = {}
local n = #KEYS / 2
local leases = redis.call('MGET', unpack(KEYS, n + 1, 2 * n))
for i = 0, n - 1 do
  local tokens, id, token = KEYS[i + 1], ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  local o = leases[i + 1]
  local r = 0
  if o == owner then
    local added = redis.pcall('XADD', tokens, id, 't', token, 'by', owner)
    if type(added) == 'table' and added.err then r = checked(tokens, id, token)
    elseif id == '0-1' then redis.call('PEXPIRE', tokens, ARGV[3]) end
  elseif o then
    r = {'lease', o}
  else
    r = checked(tokens, id, token)
  end
  if r ~= 0 then
    out[#out + 1] = i
    out[#out + 1] = r[1]
    out[#out + 1] = r[2]
  end
end
return out
"""

# The owner's leases, renewed together on a timer; each stream's keys get their TTL back too, and its
# tokens are trimmed to MAXLEN (the appends do not trim).
# KEYS meta, tokens, lease per stream; ARGV owner, lease_ms, ttl_ms, maxlen -> 1 (held) or 0 (lost) per stream.
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
    redis.call('XTRIM', tokens, 'MAXLEN', ARGV[4])
  end
  out[i + 1] = held
end
return out
"""

# A resume read in one atomic call. KEYS meta, tokens; ARGV cursor, limit (-1: all)
# -> {length or false, first kept entry (or {}), entries after the cursor}.
READ = _LENGTH + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {false, {}, {}} end
local len = length(KEYS[2])
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

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


# Every script by name: the log loads them once per connection and calls them by their SHA1.
SCRIPTS = {"create": CREATE, "claim": CLAIM, "info": INFO, "append_many": APPEND_MANY, "set_state": SET_STATE,
           "release": RELEASE, "renew_many": RENEW_MANY, "read": READ, "take_over": TAKE_OVER}


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
    if length is None or length is False:       # a script's false: nil in RESP2, false in RESP3
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


def entry_index(entry_id: str) -> int:
    """The token index of a stream entry id (``0-(i+1)`` is token ``i``)."""
    return int(entry_id.partition("-")[2]) - 1
