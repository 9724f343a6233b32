"""Where each key lives: one Redis, or the node of a Redis Cluster that serves its slot.

How this works: a log URL names one node.  The writer's first round asks it
``CLUSTER SLOTS`` (``learn``): a Redis that is no cluster says its cluster
support is disabled, and every key lives there (``home``); a cluster's
reply maps each of its 16,384 slots to the primary serving it.  A key's
slot is redis-py's ``key_slot`` (the CRC16 of its hash tag: every key of a
stream is tagged ``{<stream id>}``, so a stream's keys share one slot and a
script of one stream runs on one node).  A ``MOVED`` reply (a slot given to
another node: a resharding, a failover) moves that slot at once
(``moved``) and the writer asks ``CLUSTER SLOTS`` again for the rest; a
user refused ``CLUSTER SLOTS`` by its ACL learns the map from the ``MOVED``
replies alone.  An ``ASK`` reply (a slot being migrated, the key already on
the target) moves nothing: that one call goes to the target after
``ASKING``.  ``by_slot`` splits a call over many streams into one call per
slot, since a cluster runs a command or a script only over keys of one slot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import AskError, MovedError, TryAgainError

__all__ = ["REDIRECTS", "Topology", "redirect", "routing_key"]

T = TypeVar("T")

# Commands that name no key: they go to the node a call names, else to the URL's.
_KEYLESS = frozenset({"PING", "CONFIG", "CLIENT", "CLUSTER", "SCRIPT", "INFO", "ASKING", "TIME", "ACL"})
# What a Redis that is no cluster answers ``CLUSTER SLOTS`` with.
_NOT_A_CLUSTER = "cluster support disabled"
# The replies that send a call elsewhere (or again): MOVED, ASK (MovedError is one), TRYAGAIN.
REDIRECTS = (AskError, TryAgainError)


def routing_key(args: tuple[object, ...]) -> object | None:
    """The key a command is routed by: a script's first key, a command's first argument; None for none."""
    name = str(args[0]).upper()
    if name in ("EVALSHA", "EVAL"):
        return args[3] if int(str(args[2])) > 0 else None
    if name in _KEYLESS or len(args) < 2:
        return None
    return args[1]


def redirect(reply: Any) -> bool:
    """True if ``reply`` sends its call elsewhere or again (``MOVED``, ``ASK``, ``TRYAGAIN``)."""
    return isinstance(reply, REDIRECTS)


def _slot(key: object) -> int:
    return key_slot(key if isinstance(key, bytes) else str(key).encode())


class Topology:
    """One writer's map of the nodes: every key at ``home`` until Redis says it is a cluster."""

    def __init__(self, home: str) -> None:
        self.home = home                      # the URL's node, ``host:port``: where keyless commands go
        self.cluster = False
        self.known = False                    # CLUSTER SLOTS was answered (or refused): cluster is right
        self._slots: list[str] = []           # in a cluster: the node serving each slot
        self.version = 0                      # bumped at every change of the map

    def node_of(self, key: object | None) -> str:
        """The node serving ``key`` (``home`` for no key, or outside a cluster)."""
        if not self.cluster or key is None:
            return self.home
        return self._slots[_slot(key)]

    def nodes(self) -> set[str]:
        """Every node a key may live on now."""
        return set(self._slots) if self.cluster else {self.home}

    def by_slot(self, items: Iterable[T], key_of: Callable[[T], str]) -> list[list[T]]:
        """``items`` in groups whose keys share a slot (one group outside a cluster), each in their order."""
        items = list(items)
        if not self.cluster:
            return [items] if items else []
        groups: dict[int, list[T]] = {}
        for item in items:
            groups.setdefault(_slot(key_of(item)), []).append(item)
        return list(groups.values())

    def learn(self, reply: Any) -> None:
        """Take ``CLUSTER SLOTS``'s reply (or the error it was refused with) as the map."""
        if isinstance(reply, Exception):
            self.known = True               # no cluster, or not allowed to ask: MOVED replies would teach it
            if _NOT_A_CLUSTER in str(reply):
                self.cluster = False
            return
        slots = [self.home] * REDIS_CLUSTER_HASH_SLOTS
        host_of_home = self.home.rpartition(":")[0]
        for first, last, primary, *_ in reply:
            node = f"{primary[0] or host_of_home}:{primary[1]}"    # '' in a cluster of one node: the URL's host
            slots[int(first):int(last) + 1] = [node] * (int(last) - int(first) + 1)
        self._slots, self.cluster, self.known = slots, True, True
        self.version += 1
        if self.home not in slots:
            self.home = slots[0]            # the URL named the node otherwise (a name, not the address)

    def moved(self, error: MovedError) -> None:
        """``MOVED <slot> <host:port>``: that slot is served there from now on (a cluster, then)."""
        if not self.cluster:
            self._slots, self.cluster = [self.home] * REDIS_CLUSTER_HASH_SLOTS, True
        self._slots[error.slot_id] = f"{error.host}:{error.port}"
        self.version += 1
