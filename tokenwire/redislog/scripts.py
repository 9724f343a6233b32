"""The Redis token log's Lua scripts, and what their replies mean.

How this works: every write but the owner's appends is one script, atomic
on the server.  A token is fenced by an *epoch*, the entry id's first part:
token ``i`` written by the stream's ``e``-th owner is the entry ``e-(i+1)``.
When the lease passes to another owner, the claim starts a new epoch and
moves the stream's last id to ``e-length`` (``XSETID``), so every append the
old owner still sends (ids ``(e-1)-...``) is refused by ``XADD`` itself; the
owner's appends need no lease check: each is one plain ``XADD``, a round's
sent together (only a refused one is looked at further, by ``REFUSED``).
An append without a claim (tools, tests) takes the checked path,
``APPEND_ONE``.  A stream whose tokens key Redis evicted (memory pressure)
is *lost* (``_LOST``), never made again: every claim, read and append
says so (``StreamLost``) instead of starting it over from index 0.  Each epoch's first index is kept in the meta hash
(``epochs``), which turns an index into its entry id for the reads.  The
TTLs are re-armed by RENEW_MANY, on the owner's renewal timer.  What a
script's reply means (a value, or the core's ``LogError``) is ``replies``'.
"""

from __future__ import annotations

from .presence import PRESENCE_SCRIPTS

__all__ = ["APPEND_ONE", "CLAIM", "CREATE", "IDS_AT", "INFO", "LOSE", "READ", "REFUSED", "RELEASE", "RENEW_MANY",
           "SCRIPTS", "SET_STATE", "STOP", "TAKE_OVER"]


_LENGTH = """
local function length(tokens)
  local e = redis.call('XREVRANGE', tokens, '+', '-', 'COUNT', 1)
  if #e == 0 then return 0 end
  return tonumber(string.match(e[1][1], '%d+$'))
end
"""

# Whether a stream lost its tokens: LOSE marked it (``lost`` in the meta: a reader held tokens the log does
# not), or an owner has claimed it (its epoch is past 0, so it may have logged tokens
# that readers hold) and its tokens key is gone (made with the stream, it is never made again: Redis evicted
# it), or the key's last id ``len`` is below the index the current epoch began at (where the fence moved it:
# only a key made again is shorter).  A stream no owner claimed yet (epoch 0), or made before epochs (none),
# has logged nothing: an empty key is made for it as before.
_LOST = """
local function lost(meta, tokens, len)
  local m = redis.call('HMGET', meta, 'epoch', 'epochs', 'lost')
  if m[3] then return true end
  if tonumber(m[1] or '0') == 0 then return false end
  if redis.call('EXISTS', tokens) == 0 then return true end
  local first = string.match(m[2] or '', '(%d+),$')
  return first ~= nil and len < tonumber(first)
end
"""

# An empty tokens stream (an entry added and deleted), expiring in ttl_ms (none if not positive): made with
# the stream, so that an append never makes it (NOMKSTREAM) and a fence's XSETID has a key to move.
_EMPTY = """
local function empty(tokens, ttl_ms)
  redis.call('XADD', tokens, '0-1', 't', '')
  redis.call('XDEL', tokens, '0-1')
  if ttl_ms > 0 then redis.call('PEXPIRE', tokens, ttl_ms) end
end
"""

# The epochs: ``epoch`` (the current one), ``eowner`` (its owner), ``by:<e>`` (each epoch's owner) and
# ``epochs`` ("e:first-index," for each) in the meta hash.  id_at gives the entry id of ``index`` (kept,
# trimmed or not yet written); fence makes ``owner`` the writer of the next entries, a new epoch unless it
# already is one's owner, and moves the stream's last id past anything an older epoch could still add (a
# stream with no tokens key, made by an earlier version or evicted, gets an empty one first, so that the
# XSETID cannot fail after part of the fence was written).
_EPOCHS = _EMPTY + """
local function id_at(meta, index)
  local e = '0'
  for ep, first in string.gmatch(redis.call('HGET', meta, 'epochs') or '', '(%d+):(%d+),') do
    if tonumber(first) <= index then e = ep end
  end
  return e .. '-' .. (index + 1)
end
local function fence(meta, tokens, owner, len)
  local m = redis.call('HMGET', meta, 'epoch', 'eowner', 'epochs')
  if m[2] == owner then return tonumber(m[1]) end
  local e = tonumber(m[1] or '0') + 1
  if redis.call('EXISTS', tokens) == 0 then empty(tokens, redis.call('PTTL', meta)) end
  redis.call('XSETID', tokens, e .. '-' .. len)
  local epochs = (m[3] or '') .. e .. ':' .. len .. ','
  redis.call('HSET', meta, 'epoch', e, 'eowner', owner, 'by:' .. e, owner, 'epochs', epochs)
  return e
end
"""

# KEYS meta, tokens, lease; ARGV params, total, ttl_ms, creator.  Idempotent:
# the same creator asking again (a round sent twice after a reconnect) is told it succeeded.
# The tokens stream is made empty here (an entry added and deleted), so that an append never makes it:
# an append to a stream that expired finds no key (``NOMKSTREAM``) instead of leaving one without a TTL.
CREATE = _EMPTY + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'creator') == ARGV[4] then return 1 end
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'params', ARGV[1], 'total', ARGV[2], 'state', 'generating', 'creator', ARGV[4],
           'epoch', 0, 'epochs', '')
empty(KEYS[2], tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

# KEYS meta, tokens, lease; ARGV owner, hold_ms -> {owned 0/1, -1 unknown, -2 lost or -3 stopped, length, owner,
# epoch}.  Taking a free lease marks the stream generating (it may have been cancelled by the last owner); a
# stopped stream is never generated again.
CLAIM = _LENGTH + _LOST + _EPOCHS + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0, '', 0} end
local len = length(KEYS[2])
if lost(KEYS[1], KEYS[2], len) then return {-2, 0, '', 0} end
local o = redis.call('GET', KEYS[3])
if o == ARGV[1] then
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
  return {1, len, o, fence(KEYS[1], KEYS[2], o, len)}
end
if o then return {0, len, o, 0} end
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'stopped' then return {-3, len, '', 0} end
if state == 'done' then return {0, len, '', 0} end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[1], 'state', 'generating')
redis.call('HDEL', KEYS[1], 'failure')
return {1, len, ARGV[1], fence(KEYS[1], KEYS[2], ARGV[1], len)}
"""

# A continuation's claim: take a free lease only while the stream is still generating (a stopped or finished
# stream stays as its owner left it).  KEYS meta, tokens, lease; ARGV owner, hold_ms -> as CLAIM.
TAKE_OVER = _LENGTH + _LOST + _EPOCHS + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0, '', 0} end
local len = length(KEYS[2])
if lost(KEYS[1], KEYS[2], len) then return {-2, 0, '', 0} end
local o = redis.call('GET', KEYS[3])
if o == ARGV[1] then return {1, len, o, fence(KEYS[1], KEYS[2], o, len)} end
if o then return {0, len, o, 0} end
if redis.call('HGET', KEYS[1], 'state') ~= 'generating' then return {0, len, '', 0} end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
return {1, len, ARGV[1], fence(KEYS[1], KEYS[2], ARGV[1], len)}
"""

# KEYS meta, tokens; -> {params, total, length (-1: lost), state}, or nil for an unknown stream.
INFO = _LENGTH + _LOST + """
local m = redis.call('HMGET', KEYS[1], 'params', 'total', 'state')
if not m[1] then return nil end
local len = length(KEYS[2])
if lost(KEYS[1], KEYS[2], len) then len = -1 end
return {m[1], m[2], len, m[3]}
"""

# What a refused XADD of the group commit means (the writer sends a round's appends of the streams this
# instance owns as plain ``XADD key NOMKSTREAM e-<index+1> t token``, e the epoch of its claim: Redis refuses
# an id not past the stream's last, which is an index already taken or an epoch that is over, another owner
# having claimed the stream; NOMKSTREAM: a stream that expired is not made again).  Sent with EVAL, only for
# a round with a refusal.  KEYS the refused appends' tokens keys; ARGV entry id, token per append
# -> flat: position (from 0), status, value for each append really refused, where status, value is 'lease',
# the epoch's owner now | 'conflict', length | 'unknown', 0 | 'stopped', 0; a retried round's append that
# had landed (the same token at that id) is not in it; 'lost', 0 for a stream whose tokens key is gone.  The
# meta key is the tokens key's sibling in the same hash slot.
REFUSED = _LENGTH + _LOST + """
local function refused(tokens, id, token)
  local meta = string.sub(tokens, 1, -7) .. 'meta'
  if redis.call('EXISTS', meta) == 0 then return {'unknown', 0} end
  if lost(meta, tokens, length(tokens)) then return {'lost', 0} end
  if redis.call('EXISTS', tokens) == 0 then return {'unknown', 0} end
  local e = redis.call('XRANGE', tokens, id, id)
  if #e == 1 and e[1][2][2] == token then return 0 end
  local m = redis.call('HMGET', meta, 'epoch', 'eowner', 'state')
  if m[3] == 'stopped' then return {'stopped', 0} end
  if m[1] ~= string.match(id, '^%d+') then return {'lease', m[2] or ''} end
  return {'conflict', length(tokens)}
end
local out = {}
for i = 1, #KEYS do
  local r = refused(KEYS[i], ARGV[2 * i - 1], ARGV[2 * i])
  if r ~= 0 then
    out[#out + 1] = i - 1
    out[#out + 1] = r[1]
    out[#out + 1] = r[2]
  end
end
return out
"""

# The checked append, for an append this instance holds no claim for (tools, tests, an owner whose renewal
# found its lease gone): every check is made, and the stream trimmed to MAXLEN (nobody's renewal may trim it).
# KEYS meta, tokens, lease; ARGV owner, index, token, maxlen -> {status, value} as REFUSED's ('ok', 0
# when logged).  It appends while nobody else holds the lease,
# at the next index and within the total, in this owner's epoch (a new one if the last was another's); a
# retried append that already landed (the same token at that index) is logged.
APPEND_ONE = _LENGTH + _LOST + _EPOCHS + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown', 0} end
local len, index = length(KEYS[2]), tonumber(ARGV[2])
if lost(KEYS[1], KEYS[2], len) then return {'lost', 0} end
if redis.call('HGET', KEYS[1], 'state') == 'stopped' then return {'stopped', 0} end
local o = redis.call('GET', KEYS[3])
if o and o ~= ARGV[1] then return {'lease', o} end
if index == len and index < tonumber(redis.call('HGET', KEYS[1], 'total')) then
  local e = fence(KEYS[1], KEYS[2], ARGV[1], len)
  redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[4], e .. '-' .. (index + 1), 't', ARGV[3])
  return {'ok', 0}
end
if index < len then
  local id = id_at(KEYS[1], index)
  local e = redis.call('XRANGE', KEYS[2], id, id)
  if #e == 1 and e[1][2][2] == ARGV[3] then return {'ok', 0} end
end
return {'conflict', len}
"""

# The owner's leases, renewed together on a timer; each stream's keys get their TTL back too, and its
# tokens are trimmed to MAXLEN (the appends do not trim).
# KEYS meta, tokens, lease per stream; ARGV owner, lease_ms, ttl_ms, maxlen -> 1 (held), 0 (lost) or 2 (the
# stream was stopped: its owner stops the model at once, however long its step) per stream.
# A lease that ran out while nobody took it (Redis stalled past it) is taken again while the stream generates
# and its epoch is still this owner's (nobody claimed it in between: its appends would be refused).  A stream
# whose meta is gone (evicted) is not held: unknown now, its next append says so.
RENEW_MANY = """
local out = {}
for i = 0, #KEYS / 3 - 1 do
  local meta, tokens, lease = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  local o = redis.call('GET', lease)
  local held = 0
  if redis.call('EXISTS', meta) == 0 then
    held = 0                              -- evicted: its appends are checked from now on (and refused)
  elseif o == ARGV[1] then
    redis.call('PEXPIRE', lease, ARGV[2])
    held = 1
  elseif not o then
    local m = redis.call('HMGET', meta, 'state', 'eowner')
    if m[1] == 'generating' and m[2] == ARGV[1] then
      redis.call('SET', lease, ARGV[1], 'PX', ARGV[2])
      held = 1
    elseif m[1] == 'stopped' then
      held = 2
    end
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
# -> {length (-1: lost) or false, first kept entry (or {}), entries after the cursor}.
READ = _LENGTH + _LOST + _EPOCHS + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {false, {}, {}} end
local len = length(KEYS[2])
if lost(KEYS[1], KEYS[2], len) then return {-1, {}, {}} end
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
local rest = {}
local limit = tonumber(ARGV[2])
if limit ~= 0 then
  local cursor = tonumber(ARGV[1])
  local start = cursor < 0 and '-' or '(' .. id_at(KEYS[1], cursor)
  if limit < 0 then rest = redis.call('XRANGE', KEYS[2], start, '+')
  else rest = redis.call('XRANGE', KEYS[2], start, '+', 'COUNT', limit) end
end
return {len, first, rest}
"""

# Where the followers' shared XREAD reads each stream from: KEYS meta per stream, ARGV an index per stream
# -> the entry id of each index (``0-0`` for -1), as id_at.
IDS_AT = _EPOCHS + """
local out = {}
for i = 1, #KEYS do
  local index = tonumber(ARGV[i])
  out[i] = index < 0 and '0-0' or id_at(KEYS[i], index)
end
return out
"""

# KEYS meta, tokens, lease; ARGV owner, state, ttl_ms, failure -> the state now stored ('' if unknown).
# done and stopped are final; cancelled is ignored while another instance holds the lease
# (the stream is still generating there); done/cancelled release our lease.  The failure ('' for none: a
# stale one is dropped) is stored with the state, in the same step: a reader that sees the state sees why.
SET_STATE = """
local cur = redis.call('HGET', KEYS[1], 'state')
if not cur then return '' end
if cur == 'done' or cur == 'stopped' then return cur end
local o = redis.call('GET', KEYS[3])
if ARGV[2] == 'cancelled' and o and o ~= ARGV[1] then return cur end
redis.call('HSET', KEYS[1], 'state', ARGV[2])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'failure', ARGV[4]) else redis.call('HDEL', KEYS[1], 'failure') end
if ARGV[2] ~= 'generating' and o == ARGV[1] then redis.call('DEL', KEYS[3]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return ARGV[2]
"""

# Stop a stream for good, from any instance (``POST /streams/<id>/stop``).  KEYS meta, tokens, lease
# -> the state now ('' if unknown; 'done' stays done).  The state becomes stopped (no claim or continuation
# generates it again), the lease is dropped, and a new epoch with no owner fences the tokens: the owner's next
# append is refused (REFUSED: 'stopped'), so it stops within one step; its renewal says so between steps.
STOP = _LENGTH + _EPOCHS + """
local cur = redis.call('HGET', KEYS[1], 'state')
if not cur then return '' end
if cur == 'done' or cur == 'stopped' then return cur end
redis.call('HSET', KEYS[1], 'state', 'stopped')
redis.call('DEL', KEYS[3])
fence(KEYS[1], KEYS[2], '', length(KEYS[2]))
return 'stopped'
"""

# A reader came back with a cursor past the log's end on a stream still generating: it was sent tokens the log
# no longer holds (a failover promoted a replica that had not had them), and generating from the log's end
# would splice another answer onto it.  KEYS meta, tokens, lease; ARGV cursor -> 1 if the stream is lost now
# (marked, its lease dropped, and its tokens fenced by a new epoch with no owner, so the owner's next append
# is refused, 'lost'), 0 if the log holds the cursor's token after all or the stream is not generating,
# -1 for an unknown stream.
LOSE = _LENGTH + _LOST + _EPOCHS + """
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return -1 end
local len = length(KEYS[2])
if lost(KEYS[1], KEYS[2], len) then return 1 end
if state ~= 'generating' or len > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'lost', 1)
redis.call('DEL', KEYS[3])
fence(KEYS[1], KEYS[2], '', len)
return 1
"""

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


# Every script by name: the log loads them once per connection and calls them by their SHA1.
SCRIPTS = {"create": CREATE, "claim": CLAIM, "info": INFO, "append_one": APPEND_ONE,
           "set_state": SET_STATE, "release": RELEASE, "renew_many": RENEW_MANY, "read": READ,
           "take_over": TAKE_OVER, "ids_at": IDS_AT, "stop": STOP, "lose": LOSE, **PRESENCE_SCRIPTS}
