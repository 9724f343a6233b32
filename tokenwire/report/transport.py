"""What a report measured over loopback sockets adds: section 5, the kernel's buffers.

How this works: a report's ``transport`` says where its runs went:
``memory`` (the page: the core's in-memory wire, the channel the only
queue) or ``sockets`` (``tokenwire demo``: real loopback connections, where
the kernel's send and receive buffers are a second queue).  The demo
measures each connection as ``KernelFigures`` and hands them, in a
``Sockets`` record, to ``report.assemble(..., transport="sockets")``;
``in_memory`` runs the same plan in memory on the virtual clock so that
section 5 can set the two side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ..core.pipeline import run
from .params import ReportParams
from .plan import plan_demo
from .sections import resume_of, row_of

__all__ = ["TRANSPORTS", "InMemory", "KernelFigures", "Sockets", "Transport", "in_memory"]

Transport = Literal["memory", "sockets"]
TRANSPORTS: tuple[Transport, ...] = ("memory", "sockets")


@dataclass(frozen=True, slots=True)
class KernelFigures:
    """Section 5, one connection over sockets: what sat in kernel buffers, sampled at every token the reader took.

    sndbuf/rcvbuf: effective ``SO_SNDBUF`` of the server's socket and
    ``SO_RCVBUF`` of the reader's (as the kernel reports them, after it
    doubled the request); send_queue_max: deepest ``TIOCOUTQ`` on the
    server's socket; recv_queue_max: deepest ``FIONREAD`` on the reader's;
    in_kernel_bytes_max: most bytes the server had handed to the kernel that
    the reader had not yet read; in_kernel_tokens_max: the same in whole
    token frames; reader_held_max: token frames the reader had pulled out of
    the kernel but not yet taken; channel_depth_max: deepest channel seen at
    the same instants; samples: how many instants; channel_high_water and
    channel_capacity: the connection's channel, as the server logged it.
    """

    sndbuf: int
    rcvbuf: int
    send_queue_max: int
    recv_queue_max: int
    in_kernel_bytes_max: int
    in_kernel_tokens_max: int
    reader_held_max: int
    channel_depth_max: int
    samples: int
    channel_high_water: int
    channel_capacity: int


@dataclass(frozen=True, slots=True)
class InMemory:
    """The demo's plan run in memory on the virtual clock, where the channel is the only queue (see ``in_memory``)."""

    drop_delivered: int
    block_wall_ms: float
    generated_at_reconnect: int


@dataclass(frozen=True, slots=True)
class Sockets:
    """Section 5, present for the sockets transport only: the kernel's buffers as the demo measured them.

    sndbuf_asked/rcvbuf_asked: bytes asked for (None: the kernel's own
    sizes); recv_chunk: most bytes the reader takes out of the kernel at
    once; connections: by name, in the order they ran; sent_when_noticed:
    token frames the server had sent when a failed write told it the reader
    had hung up; kernel_defaults: the machine's ``(tcp_rmem, tcp_wmem)``
    starting sizes, None if unreadable; answer_bytes: the whole answer's
    frames; in_memory: the same plan in memory; wall_s: all connections.
    """

    sndbuf_asked: int | None
    rcvbuf_asked: int | None
    recv_chunk: int
    connections: Mapping[str, KernelFigures]
    sent_when_noticed: int
    kernel_defaults: tuple[int, int] | None
    answer_bytes: int
    in_memory: InMemory
    wall_s: float

    @property
    def granted(self) -> KernelFigures:
        """The first connection's figures, whose buffer sizes the kernel granted."""
        return next(iter(self.connections.values()))


def in_memory(params: ReportParams) -> InMemory:
    """Run the demo's block, drop-newest and cancel runs for ``params`` on the virtual clock; returns their figures."""
    specs = plan_demo(params, "virtual")
    block, drop, cancel = (run(specs[name]) for name in ("block", "drop-newest", "cancel"))
    return InMemory(drop_delivered=len(drop.ids), block_wall_ms=row_of(block).wall_ms,
                    generated_at_reconnect=resume_of(cancel, block.text).generated_at_reconnect)
