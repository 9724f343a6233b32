"""What tokenwire needs a Redis user to be allowed, and the start-up check that it is: least privilege, proven.

How this works: ``NEEDS`` lists every command the log sends, itself
(``direct``) or from its Lua scripts, each with what it is for and a probe:
a harmless call of it on scratch keys under the log's prefix
(``<prefix>:{tokenwire-check}:...``).  ``ACL_RULE`` is the rule docs/redis.md
gives, built from the same list.  ``refused(...)`` asks Redis, on a
connection of its own, which of them the log's user may not run: with
``ACL DRYRUN <user> <probe>`` for each where the user may run ``ACL DRYRUN``
(nothing is run, one round trip), else by running the probes (the direct
ones as they are, the scripted ones inside one ``EVAL`` with
``redis.pcall``, which reports a refused command without aborting the
script; a call that fails for any other reason was allowed).  The scratch
keys expire within seconds and are deleted at the end.  A user who may not
touch the prefix's keys is told that too.  ``NotPermitted`` names every
refused command: a server refuses to start on it, since a gap fails
quietly otherwise (without ``TIME`` the presence of readers never runs out
and ``on_disconnect="cancel"`` never cancels; without ``XSETID`` every
stream opens and ends empty).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["ACL_RULE", "NEEDS", "Need", "NotPermitted", "refusal", "refused", "user_of"]


class NotPermitted(Exception):
    """The log's Redis user may not run a command tokenwire needs; the message names each one."""


@dataclass(frozen=True, slots=True)
class Need:
    """One command the log needs: its ACL name, what it is for, whether the log sends it itself, its probe."""

    command: str
    purpose: str
    direct: bool
    probe: tuple[str, ...]


# Scratch keys a probe touches, by kind ({s} stream, {h} hash, {z} sorted set, {k} string), under the prefix.
_SCRATCH = {"s": "stream", "h": "hash", "z": "zset", "k": "string"}
# How long a scratch key lives if the probe's DEL never runs (the user may not DEL): gone in seconds.
_SCRATCH_TTL_MS = "5000"
_PROBE_SCRIPT = "return 1"
# A refusal says what each command is for up to this many commands; past it the list alone is long enough.
_PURPOSES_SAID = 3        # what SCRIPT LOAD, EVALSHA and EVAL are probed with

NEEDS: tuple[Need, ...] = (
    Need("ping", "whether Redis answers: RedisTokenLog.ping, for tools", True, ("PING",)),
    Need("client|id", "the followers' reader learns its connection's id", True, ("CLIENT", "ID")),
    Need("client|unblock", "a new stream joins the followers' blocked XREAD at once", True,
         ("CLIENT", "UNBLOCK", "0")),
    Need("script|load", "the log's Lua scripts, loaded once per connection", True, ("SCRIPT", "LOAD", _PROBE_SCRIPT)),
    Need("evalsha", "every write but the owner's appends is one of those scripts", True,
         ("EVALSHA", hashlib.sha1(_PROBE_SCRIPT.encode()).hexdigest(), "0")),
    Need("eval", "a round's refused appends are looked at by one script sent whole", True,
         ("EVAL", _PROBE_SCRIPT, "0")),
    Need("xadd", "each token's append: the owner's plain XADD, and in the scripts", True,
         ("XADD", "{s}", "NOMKSTREAM", "*", "t", "")),
    Need("xread", "the followers' one blocking read over every followed stream", True,
         ("XREAD", "COUNT", "1", "STREAMS", "{s}", "0-0")),
    Need("cluster|slots", "which node of a Redis Cluster serves each slot, asked once (on one Redis it says it is "
         "none)", True, ("CLUSTER", "SLOTS")),
    Need("asking", "a call a Redis Cluster's migrating slot sent on (ASK) is let in on the target", True,
         ("ASKING",)),
    Need("role", "a redis+sentinel:// connection checks that the node it reached is the primary; the replicas "
         "warning counts them", True, ("ROLE",)),
    Need("wait", "min_replicas: each round waits for that many replicas to acknowledge it", True,
         ("WAIT", "0", "0")),
    Need("get", "a chat's latest stream and a response's record", True, ("GET", "{k}")),
    Need("set", "keeping those; taking a lease, in the scripts", True, ("SET", "{k}", "v", "XX", "PX", "1")),
    Need("hget", "a stream's meta fields", True, ("HGET", "{h}", "f")),
    Need("hmget", "a stream's state and failure, read together", True, ("HMGET", "{h}", "f")),
    Need("hset", "a stream's meta: its spec, state and epochs", False, ("HSET", "{h}", "f", "v")),
    Need("pexpire", "every key's TTL, re-armed by the owner's renewal", False, ("PEXPIRE", "{h}", _SCRATCH_TTL_MS)),
    Need("hdel", "a failure dropped when a stream is claimed again", False, ("HDEL", "{h}", "f")),
    Need("exists", "whether a stream or its tokens are still there", False, ("EXISTS", "{h}")),
    Need("xsetid", "the fence: a new owner's epoch moves the stream's last id past the old one's", False,
         ("XSETID", "{s}", "0-1")),
    Need("xrange", "reads of the logged tokens", False, ("XRANGE", "{s}", "-", "+", "COUNT", "1")),
    Need("xrevrange", "a stream's length: its last entry's id", False, ("XREVRANGE", "{s}", "+", "-", "COUNT", "1")),
    Need("xdel", "a new stream's tokens key made empty", False, ("XDEL", "{s}", "0-1")),
    Need("xtrim", "the renewal's trim to maxlen", False, ("XTRIM", "{s}", "MAXLEN", "100")),
    Need("pttl", "a fenced stream's tokens key given its meta's TTL", False, ("PTTL", "{h}")),
    Need("del", "a stream made again over an old one's keys, a lease released", False, ("DEL", "{k}")),
    Need("time", "Redis's clock: when a reader's presence runs out, for on_disconnect='cancel'", False, ("TIME",)),
    Need("zadd", "a reader's presence, renewed with the leases", False, ("ZADD", "{z}", "1", "m")),
    Need("zrem", "a reader leaving", False, ("ZREM", "{z}", "m")),
    Need("zremrangebyscore", "presence entries that ran out", False, ("ZREMRANGEBYSCORE", "{z}", "-inf", "0")),
    Need("zcard", "whether any reader is left", False, ("ZCARD", "{z}")),
)

# The rule docs/redis.md gives (user, password and prefix put in), and the one command tokenwire asks that it
# may be refused: ``CONFIG GET maxmemory-policy``, refused quietly (it only warns of an evicting policy).
ACL_RULE = ("ACL SETUSER {user} on >{password} resetkeys ~{prefix}:* resetchannels -@all "
            + " ".join(f"+{need.command}" for need in NEEDS))

# KEYS the scratch keys; ARGV each scripted probe as its length then its words -> the commands refused.
_PROBES = """
local refused, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local r = redis.pcall(unpack(ARGV, i + 1, i + n))
  if type(r) == 'table' and r.err and string.find(r.err, "can't run this command", 1, true) then
    table.insert(refused, string.lower(ARGV[i + 1]))
  end
  i = i + n + 1
end
for _, key in ipairs(KEYS) do redis.pcall('PEXPIRE', key, TTL_MS) end
redis.pcall('DEL', unpack(KEYS))
return refused
""".replace("TTL_MS", _SCRATCH_TTL_MS)


def refusal(where: str, user: str, missing: list[str]) -> str:
    """The one line that names each command (or key pattern) the user may not use, and what to give it."""
    purposes = {need.command: need.purpose for need in NEEDS}
    said = purposes if len(missing) <= _PURPOSES_SAID else {}
    named = ", ".join(_named(m, said) for m in missing)
    grant = " ".join(m if m.startswith("~") else f"+{m}" for m in missing)
    them = "them" if len(missing) > 1 else "it"
    return (f"redis at {where}: user {user!r} may not use {named}; tokenwire needs {them}: ACL SETUSER {user} "
            f"{grant} (the whole rule: docs/redis.md, 'Least privilege')")


def _named(missing: str, purposes: dict[str, str]) -> str:
    """A refused command as a user types it (``CLIENT UNBLOCK``), with what it is for; or the keys."""
    if missing.startswith("~"):
        return f"the keys {missing}"
    shown = missing.upper().replace("|", " ")
    return f"{shown} ({purposes[missing]})" if missing in purposes else shown


def user_of(url: str) -> str:
    """The user a log URL logs in as: its userinfo's, its ``username`` setting, else ``default``."""
    parts = urlsplit(url)
    if parts.username:
        return unquote(parts.username)
    return dict(parse_qsl(parts.query)).get("username") or "default"


def _args(need: Need, prefix: str) -> list[str]:
    return [f"{prefix}:{{tokenwire-check}}:{_SCRATCH[word[1]]}" if word in ("{s}", "{h}", "{z}", "{k}") else word
            for word in need.probe]


async def refused(redis: Any, url: str, prefix: str) -> list[str]:
    """The commands of ``NEEDS`` the user of ``url`` may not run, on ``redis`` (a redis.asyncio client).

    A user who may not use the prefix's keys gets ``~<prefix>:*``.  Raises redis-py's errors for a Redis that
    does not answer.
    """
    from redis.exceptions import ResponseError  # here: NotPermitted is imported without the redis extra

    user = user_of(url)
    asks = await _pipelined(redis, [("ACL", "DRYRUN", user, *_args(need, prefix)) for need in NEEDS])
    if not isinstance(asks[0], ResponseError):          # ACL DRYRUN allowed: it said, without running anything
        keys = any(isinstance(said, str) and "access" in said for said in asks)
        return [*(f"~{prefix}:*" for _ in range(keys)),
                *(need.command for need, said in zip(NEEDS, asks, strict=True) if said != "OK" and "run" in str(said))]
    return await _probed(redis, prefix)


async def _probed(redis: Any, prefix: str) -> list[str]:
    """``refused`` by running the probes: the direct ones in one pipeline, the scripted ones in one EVAL."""
    direct = [need for need in NEEDS if need.direct]
    said = await _pipelined(redis, [tuple(_args(need, prefix)) for need in direct])
    keys = [f"{prefix}:{{tokenwire-check}}:{kind}" for kind in _SCRATCH.values()]
    words = [word for need in NEEDS if not need.direct for word in (str(len(need.probe)), *_args(need, prefix))]
    scripted = (await _pipelined(redis, [("EVAL", _PROBES, len(keys), *keys, *words)]))[0]
    out = [need.command for need, reply in zip(direct, said, strict=True) if _denied(reply, "run")]
    if any(_denied(reply, "access") for reply in [*said, scripted]):
        out.insert(0, f"~{prefix}:*")
    if isinstance(scripted, list):
        out += [need.command for need in NEEDS if not need.direct and need.command in scripted]
    return out


def _denied(reply: Any, what: str) -> bool:
    """True if ``reply`` is Redis refusing the user: to ``run`` a command, or to ``access`` a key."""
    from redis.exceptions import NoPermissionError

    return isinstance(reply, NoPermissionError) and what in str(reply)


async def _pipelined(redis: Any, calls: list[tuple[Any, ...]]) -> list[Any]:
    """Every call in one round trip; each reply, or the error Redis answered it with."""
    pipe = redis.pipeline(transaction=False)
    for call in calls:
        pipe.execute_command(*call)
    return list(await pipe.execute(raise_on_error=False))
