"""The group commit: one log writer per event loop, one round trip per round, whatever the number of streams.

How this works: every command a process or a route sends to Redis is queued
here and answered through a future.  While no round is in flight the next
loop turn starts one; while one is in flight, what arrives meanwhile waits
for it to be answered and goes in the next round (at most one round trip of
waiting).  While other streams append here too, a round of appends alone is
held for more until its oldest append is ``GATHER_S`` old or it carries
``GATHER_APPENDS`` (gathering: part of Redis's cost is per round, so fuller
rounds cost it less per token).  A round is one pipeline on the writer's
one connection (``rounds``, ``links``): a plain ``XADD`` for every queued
append of a stream this instance owns, fenced by the epoch of its claim (a
refused one is looked at with one more call, ``REFUSED``, and fails that
stream's asker alone), an ``APPEND_ONE`` call, every check made, for each
append of a stream it holds no claim for, then the other queued commands
(creations, resume reads, state changes, lease claims, the renewal).  The
writer packs the round itself and hiredis parses the replies (``resp``):
when every ``XADD`` landed, their replies are one comparison of bytes,
parsed by none.  Scripts are called by SHA1; a Redis that lost its script
cache (restarted) has them loaded again and the refused calls go in the
next round.  Any error of the round itself (Redis down, no answer within
``STALL_TIMEOUT_S``) fails every asker in it with ``LogUnavailable``, as
does an append's own error that is not a refusal (Redis out of memory).

On a Redis Cluster (``topology``: the first round asks the URL's node
``CLUSTER SLOTS``) a round is one such pipeline per node, sent together:
each append and command goes to the node serving its key's slot, on the
writer's connection there (``links``), so a round costs one round trip per
node, not one per stream.  A call a node redirects is sent again in the
next round: after a ``MOVED`` to the slot's new node (and the map is asked
again), after an ``ASK`` once to the target after ``ASKING``, after a
``TRYAGAIN`` a moment later (``redirects``); past ``MAX_REDIRECTS`` it
fails as Redis failing does.  With ``min_replicas=N`` every round ends
with ``WAIT`` (``replicas``).  The owner's leases and the readers' presence
are renewed through these rounds too, on ``renewal``'s timer, one call per
slot (``Topology.by_slot``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable
from typing import Any

import redis
from redis.exceptions import NoScriptError, ResponseError

from ..core.tokenlog import LogError
from . import replicas
from .clients import Settings, home_of, unavailable
from .links import Link
from .redirects import MAX_REDIRECTS, TRYAGAIN_S, Redirects
from .renewal import Renewal
from .replies import appended
from .resp import pack
from .rounds import ASKING, Append, Appends, Command, Parse, RoundFigures, Settles, logged, settle
from .scripts import REFUSED, SCRIPTS
from .topology import Topology, redirect, routing_key

__all__ = ["GATHER_APPENDS", "GATHER_S", "GATHER_SIBLINGS", "MAX_APPENDS_PER_ROUND", "MAX_COMMANDS_PER_ROUND",
           "MAX_REDIRECTS", "TRYAGAIN_S", "LogWriter"]

# Appends in one round: 1,024 covers a process's 1,000 streams each with a token waiting; more wait one round.
MAX_APPENDS_PER_ROUND = 1024
# Other commands in one round (creations, reads, state changes).
MAX_COMMANDS_PER_ROUND = 512
# Gathering (PostgreSQL's commit_delay and commit_siblings): a round of appends is held for more, up to
# GATHER_S after its oldest append was queued or until it has GATHER_APPENDS, while the last round carried
# at least GATHER_SIBLINGS (other streams append here too).  Redis pays a share of every round whatever it
# carries (its wake-up, reads and writes, the script call), besides ~2-4 us an append: at 300 streams x 50
# tokens/s rounds went back to back every ~1.3 ms with ~18 appends each and Redis spent ~6 us a token;
# held for up to 3-4 ms they carry ~60-90 (measured, bench/RESULTS.md, issue 17).  What it costs: a token's
# append may wait up to GATHER_S more before its round is sent (on top of the round in flight), so the
# token reaches its reader up to that much later; a lone stream (or a few) never waits, and a round with
# any other command queued (a request waits on it) goes at once.
# 3 ms: under a fraction of a millisecond nothing changes (a loaded process's round trip is already longer);
# 4-8 ms measured no lower within this machine's run-to-run noise, and widen the gaps between a reader's tokens.
GATHER_S = 0.003
GATHER_APPENDS = 128        # ~2.5 ms of 1,000 streams' tokens: past it a round gains little by waiting
GATHER_SIBLINGS = 4         # fewer appenders fill a round too slowly to be worth a token's wait
# What Redis says to an XADD whose id is not past the stream's last: the index is taken, or its epoch is over.
_REFUSED_ID = "equal or smaller than the target stream top item"
# A command refused with NOSCRIPT is sent again this many times (the scripts are loaded in between).
_NOSCRIPT_RETRIES = 2


class LogWriter:
    """One event loop's queue of Redis commands, flushed a round at a time on one connection per node."""

    def __init__(self, settings: Settings, loop: asyncio.AbstractEventLoop) -> None:
        self.settings, self.loop = settings, loop
        home = Link(settings, None)
        self.topology = Topology(home_of(home.redis))     # every key at the URL's node until Redis says otherwise
        self._links: dict[str, Link] = {self.topology.home: home}
        self.shas = {name: hashlib.sha1(text.encode()).hexdigest() for name, text in SCRIPTS.items()}
        self._appends: list[Append] = []
        self._commands: list[Command] = []
        self._flushing, self._replied_at = False, 0.0     # a round under way; when it was last answered (a node)
        self.closed = False                   # ``close`` was called: a holder of this writer asks for another
        self._oldest = 0.0                    # loop time the oldest queued append was queued at
        self._last_appends = 0                # appends the last round carried
        self._gathering: asyncio.Future[None] | None = None   # set while a round is held for more appends
        self.gathered_s = 0.0                 # time rounds were held for more appends (for tests and the bench)
        self._pruned = 0                      # the map's version the links were last pruned at
        self.redirects = Redirects(settings, self.topology, self.command)   # a cluster's MOVED, ASK, TRYAGAIN
        self.rounds = 0                       # rounds sent (for tests and the bench)
        self.figures = RoundFigures()         # each round's time, the appends Redis took (``/metrics``)
        self.renewal = Renewal(settings, loop, self.script, self.topology.by_slot)   # leases, presence, on a timer

    # -- queueing ----------------------------------------------------------------------------------
    def command(self, *args: object, parse: Parse | None = None, node: str | None = None) -> asyncio.Future[Any]:
        """Queue one command (to ``node`` if given, else its key's); returns the future of its (parsed) reply."""
        future: asyncio.Future[Any] = self.loop.create_future()
        self._commands.append(Command(args, future, parse, node))
        if self._gathering is not None:
            settle(self._gathering)                 # a command is not held: the round goes now
        self._kick()
        return future

    def script(self, name: str, keys: Iterable[str], args: Iterable[object], parse: Parse | None = None
               ) -> asyncio.Future[Any]:
        keys = tuple(keys)
        return self.command("EVALSHA", self.shas[name], len(keys), *keys, *args, parse=parse)

    def append(self, stream_id: str, index: int, token: str) -> asyncio.Future[None]:
        """Queue a fenced append; the future is done once Redis has it (or raises the core's ``LogError``)."""
        self.append_then(stream_id, self.settings.keys(stream_id), index, token, future := self.loop.create_future())
        return future

    def append_then(self, stream_id: str, keys: tuple[str, str, str], index: int, token: str, told: Settles,
                    head: bytes = b"") -> None:
        """Queue a fenced append (``keys``, ``head``: the stream's, see ``Append``), told through ``told``."""
        if not self._appends:
            self._oldest = self.loop.time()
        self._appends.append(Append(stream_id, keys, index, token, told, head))
        if self._gathering is not None and len(self._appends) >= GATHER_APPENDS:
            settle(self._gathering)                 # full enough: the round goes now
        if not self._flushing:                      # ``_kick``'s test, a call fewer per token
            self._kick()

    async def ready(self) -> None:
        """Return once the writer knows whether Redis is a cluster (its first round asks); raises the round's
        ``LogUnavailable`` if Redis does not answer."""
        if not self.topology.known:
            await self.command("PING")

    @property
    def holding(self) -> bool:
        """A round is being held for more appends now (``GATHER_S``)."""
        return self._gathering is not None

    def _kick(self) -> None:
        if not self._flushing:
            self._flushing = True
            self.loop.create_task(self._flush())     # next loop turn: what this turn queues joins the round

    # -- rounds ----------------------------------------------------------------------------------------
    async def _flush(self) -> None:
        try:
            while self._appends or self._commands:
                await self._gather()
                await self._between_rounds()
                appends, self._appends = self._appends[:MAX_APPENDS_PER_ROUND], self._appends[MAX_APPENDS_PER_ROUND:]
                self._last_appends = len(appends) or self._last_appends
                commands = self._commands[:MAX_COMMANDS_PER_ROUND]
                del self._commands[:MAX_COMMANDS_PER_ROUND]
                started = self._replied_at = self.loop.time()
                landed = await self._round(appends, commands)
                self.figures.count(landed, self._replied_at - started)    # sent to answered, not the tellings
        finally:
            self._flushing = False

    async def _gather(self) -> None:
        """Hold the round for more appends (see ``GATHER_S``): at most until its oldest append is GATHER_S old."""
        if self._commands or self._last_appends < GATHER_SIBLINGS or len(self._appends) >= GATHER_APPENDS:
            return
        wait = self._oldest + GATHER_S - self.loop.time()
        if wait <= 0:
            return
        gathering = self._gathering = self.loop.create_future()
        timer = self.loop.call_later(wait, settle, gathering)
        started = self.loop.time()
        try:
            await gathering
        finally:
            timer.cancel()
            self._gathering = None
            self.gathered_s += self.loop.time() - started

    async def _between_rounds(self) -> None:
        """Before a round: wait out a TRYAGAIN, ask the URL's node whether it is a cluster (the first round,
        until it answers), and close the connections of nodes the map no longer names."""
        if self.redirects.pause:
            self.redirects.pause = False
            await asyncio.sleep(TRYAGAIN_S)
        if not self.topology.known:
            try:
                _, (reply,) = await self._link(self.topology.home).exchange(pack(("CLUSTER", "SLOTS")), [], b"", 1)
            except Exception:  # noqa: BLE001 - Redis is away: the round fails and says why; the next asks again
                return
            self.topology.learn(reply)
        if self._pruned != self.topology.version:
            self._pruned = self.topology.version
            nodes = self.topology.nodes() | {self.topology.home}
            for node in [node for node in self._links if node not in nodes]:
                await self._links.pop(node).close()

    @property
    def links(self) -> dict[str, Link]:
        """The writer's connections by node (for tests and the bench: each one's ``exchanges``)."""
        return dict(self._links)

    def _link(self, node: str) -> Link:
        link = self._links.get(node)
        return link if link is not None else self._links.setdefault(node, Link(self.settings, node))

    async def _round(self, appends: list[Append], commands: list[Command]) -> int:
        """Send the round: to the one Redis, or to each node its part, together (one round trip per node);
        returns how many of its appends landed."""
        self.rounds += 1
        topology = self.topology
        if not topology.cluster:
            return await self._node_round(topology.home, appends, commands)
        parts: dict[str, tuple[list[Append], list[Command]]] = {}
        for a in appends:
            parts.setdefault(a.asking or topology.node_of(a.keys[1]), ([], []))[0].append(a)
        for c in commands:
            node = c.asking or c.node or topology.node_of(routing_key(c.args))
            parts.setdefault(node, ([], []))[1].append(c)
        return sum(await asyncio.gather(*(self._node_round(node, a, c) for node, (a, c) in parts.items())))

    async def _node_round(self, node: str, appends: list[Append], commands: list[Command]) -> int:
        """One node's part of a round: its pipeline sent, every asker told (or its call queued again); returns
        how many of its appends landed."""
        link = self._link(node)
        try:
            out = Appends(appends, self.renewal.owned, self.settings.owner_id, self.settings.maxlen,
                          self.shas["append_one"])
            added, replies = await self._send(link, out, commands)
            moved = [] if added is None else await self._refused(link, out.fast, added)
        except Exception as exc:        # Redis down or stalled past the timeout: every asker is told
            self._replied_at = max(self._replied_at, self.loop.time())
            error = unavailable(self.settings, exc)
            for a in appends:
                settle(a.future, error=error)
            for command in commands:
                settle(command.future, error=error)
            return 0
        self._replied_at = max(self._replied_at, self.loop.time())
        landed, noscript = logged(out.fast, added, moved), False
        if out.slow:
            noscript, checked = self._checked(out.slow, replies[:len(out.slow)], moved)
            replies, landed = replies[len(out.slow):], landed + checked
        self._appends[:0] = moved                # sent again where the cluster said, first, in their order
        if self._commands_answered(commands, replies) or noscript:
            await link.load_scripts()
        return landed

    def _commands_answered(self, commands: list[Command], replies: list[Any]) -> bool:
        """Tell each command's asker its reply, or queue it again (redirected, or NOSCRIPT: then True, the
        scripts must be loaded again first)."""
        redone: list[Command] = []               # sent again after the scripts are loaded, in their order
        sent_on: list[Command] = []
        missing: NoScriptError | None = None
        for command, reply in zip(commands, replies, strict=True):
            if isinstance(reply, NoScriptError):
                redone.append(command)
                missing = reply
            elif self.redirects.follow(command, reply):
                sent_on.append(command)
            else:
                self._answered(command, reply)
        self._commands[:0] = sent_on
        if missing is not None:
            self._again(redone, self._commands, missing)
        return bool(redone)

    async def _send(self, link: Link, out: Appends, commands: list[Command]) -> tuple[list[Any] | None, list[Any]]:
        """One round trip to ``link``'s node: every command packed into one write, the replies read in order.

        Returns the ``XADD``s' replies (None when every one landed) and the other calls'.  Sent again once
        on a fresh connection if the old one was closed (Redis restarted); sending a round twice is safe: a
        landed append is recognised, a create carries its creator token, the rest are reads or idempotent.
        """
        loads = 0 if link.loaded else len(SCRIPTS)      # the first round loads the scripts ahead of its calls
        parts = [pack(("SCRIPT", "LOAD", text)) for text in SCRIPTS.values()][:loads]
        kept = [False] * loads                          # which replies are the calls' (not SCRIPT LOAD's, ASKING's)
        calls: list[tuple[Append | Command, tuple[object, ...]]] = [*zip(out.slow, out.slow_calls, strict=True)]
        for item, args in calls + [(c, c.args) for c in commands]:
            if item.asking is not None:
                parts.append(ASKING)
                kept.append(False)
            parts.append(pack(args))
            kept.append(True)
        wait = replicas.wait_command(self.settings, self.topology.cluster)   # min_replicas: after every call
        payload = out.xadds + b"".join(parts) + wait
        sent: list[Append | Command] = [*out.fast, *out.slow, *commands]
        for item in sent:
            item.asking = None                          # an ASK is followed once; another ASK says it again
        for attempt in (1, 2):
            try:
                added, replies = await link.exchange(payload, out.asking, out.expect, len(parts) + bool(wait))
                link.loaded = True
                replicas.acknowledged(self.settings, replies, wait)    # else the round fails: none is told
                return added, [reply for reply, keep in zip(replies, kept, strict=True) if keep]
            except redis.ConnectionError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _refused(self, link: Link, appends: list[Append], added: list[Any]) -> list[Append]:
        """Settle the appends whose ``XADD`` was refused, with what ``REFUSED`` finds (one more round trip, one
        call per slot); returns the appends the cluster redirected, to be sent again."""
        refused, moved = [], []
        for a, reply in zip(appends, added, strict=True):
            if self.redirects.follow(a, reply):
                moved.append(a)
            elif reply is None or isinstance(reply, ResponseError) and _REFUSED_ID in str(reply):
                refused.append(a)           # the stream is gone, or the id is not past its last: why, below
            elif not isinstance(reply, str):
                settle(a.future, error=unavailable(self.settings, reply))   # Redis failing (out of memory...)
        if not refused:
            return moved
        groups = self.topology.by_slot(refused, lambda a: a.keys[1])
        calls = [pack(("EVAL", REFUSED, len(group), *(a.keys[1] for a in group),
                       *(part for a in group for part in (a.entry, a.token)))) for group in groups]
        try:
            _, replies = await link.exchange(b"".join(calls), [], b"", len(calls))
        except Exception as exc:        # Redis went away since: these appends are not known to be logged
            for a in refused:
                settle(a.future, error=unavailable(self.settings, exc))
            return moved
        for group, reply in zip(groups, replies, strict=True):
            moved += self._why(group, reply)
        return moved

    def _why(self, refused: list[Append], reply: Any) -> list[Append]:
        """Settle ``refused`` by ``REFUSED``'s ``reply`` (only the really refused ones are in it); returns them
        all if the cluster redirected the call (their XADDs go again, and are looked at where they land)."""
        if redirect(reply):
            return [a for a in refused if self.redirects.follow(a, reply)]
        if isinstance(reply, Exception):
            for a in refused:
                settle(a.future, error=unavailable(self.settings, reply))
            return []
        for at in range(0, len(reply), 3):
            a = refused[int(reply[at])]
            try:
                appended(a.stream_id, a.index, reply[at + 1], reply[at + 2])
            except LogError as exc:
                settle(a.future, error=exc)
        return []

    def _checked(self, appends: list[Append], replies: list[Any], moved: list[Append]) -> tuple[bool, int]:
        """Settle each checked append by its reply (or add it to ``moved``, redirected); returns whether the
        scripts must be loaded again, and how many landed."""
        missing = [(a, reply) for a, reply in zip(appends, replies, strict=True) if isinstance(reply, NoScriptError)]
        if missing:
            self._again([a for a, _ in missing], self._appends, missing[0][1])
        landed = 0
        for a, reply in zip(appends, replies, strict=True):
            if isinstance(reply, NoScriptError):
                continue
            if self.redirects.follow(a, reply):
                moved.append(a)
                continue
            if isinstance(reply, Exception):
                settle(a.future, error=unavailable(self.settings, reply))
                continue
            try:
                appended(a.stream_id, a.index, reply[0], reply[1])
            except LogError as exc:
                settle(a.future, error=exc)
                continue
            settle(a.future)
            landed += 1
        return bool(missing), landed

    def _answered(self, command: Command, reply: Any) -> None:
        if isinstance(reply, Exception):
            settle(command.future, error=unavailable(self.settings, reply))
            return
        try:
            settle(command.future, command.parse(reply) if command.parse is not None else reply)
        except LogError as exc:
            settle(command.future, error=exc)

    def _again(self, items: list[Any], queue: list[Any], reply: Exception) -> None:
        for item in items:
            item.tries += 1
            if item.tries > _NOSCRIPT_RETRIES:
                settle(item.future, error=unavailable(self.settings, reply))
        queue[:0] = [item for item in items if item.tries <= _NOSCRIPT_RETRIES]

    async def close(self) -> None:
        self.renewal.stop()
        links, self._links, self.closed = list(self._links.values()), {}, True
        for link in links:
            await link.close()
