"""What the endpoints count for ``/metrics``: plain ints and ``Buckets``, folded into Prometheus's at scrape time.

How this works: one ``Meter`` per ``Endpoints`` (so per app: two apps in one
process count apart).  The endpoints count a stream made (``created``), an
endpoint's refusal by status (``refused``), and an event stream opened after
a cursor the reader holds (``resumed``: the decision says so, on every wire;
never the server's own reads of a stream it gathers).  Each connection's
rendering is wrapped in ``Metered``, which times its token frames as they
are made, just before the writer hands each to the wire: TTFT is measured
server-side from the request's arrival at the endpoints (``LiveRequest``
decided: its head parsed) to its first token frame, for a connection that
reads a stream from its first token (a resume's first frame is a replayed
token, not a first token); the inter-token latency is the gap between two
consecutive token frames of one connection, both of them tokens that came
live (not replayed from the log at connect: a replay's gaps are the wire's
speed, not the stream's), sampled: the gap before every 8th token
(``ITL_SAMPLE_MASK``).  Nothing here calls a metrics library: a token costs
an integer addition and a bit test, and one in eight two clock reads and a
bucket (``Buckets``); ``tokenwire.endpoints.exposition`` reads it all when
scraped.

The buckets, in seconds: vLLM's ``vllm:time_to_first_token_seconds`` bounds
for TTFT as they are (1 ms to 43 min: a first token waits for the model, as
vLLM's does, and the same bounds let a dashboard put tokenwire's TTFT beside
vLLM's and see what delivery adds); for the inter-token latency vLLM's
``vllm:inter_token_latency_seconds`` bounds (10 ms to 80 s) with 1, 2.5, 5,
7.5, 15 and 20 ms added below 25 ms: a delivery server sees the gaps of fast
models (2-10 ms a token) and of a reader catching up, which vLLM's lowest
bucket would lump together, and 20 ms is 50 tokens a second.
"""

from __future__ import annotations

import time
from collections import Counter

from ..core.buckets import Buckets
from ..core.frames import TokenItem
from ..core.rendering import Rendered, Rendering

__all__ = ["ITL_BUCKETS", "ITL_SAMPLE_MASK", "TTFT_BUCKETS", "Meter", "Metered"]

_now = time.perf_counter_ns

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
               0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)


# The inter-token latency is sampled: the gap before each token whose index is a multiple of 8 (the mask + 1),
# on every connection.  Reading the clock and bucketing a gap at every token measured about 2 us a token on
# tokenwire serve (10% of its CPU per token, bench/RESULTS.md, issue 24); a histogram's quantiles need a fair
# sample of gaps, not every one, and an index says nothing of its gap's length, so the sample is unbiased.
ITL_SAMPLE_MASK = 7


class Meter:
    """One app's counts: streams made, resumes, refusals by status, token frames sent, TTFT and ITL buckets."""

    __slots__ = ("created", "itl", "refused", "resumed", "sent", "ttft")

    def __init__(self) -> None:
        self.created = 0
        self.resumed = 0
        self.sent = 0
        self.refused: Counter[int] = Counter()
        self.ttft = Buckets(TTFT_BUCKETS)
        self.itl = Buckets(ITL_BUCKETS)

    def rendering(self, rendering: Rendering, arrived_ns: int, cursor: int, resumed: bool) -> Metered:
        """``rendering`` for one connection of a request that arrived at ``arrived_ns`` and reads after ``cursor``
        (``resumed``: the request named a cursor it holds; counted)."""
        if resumed:
            self.resumed += 1
        return Metered(rendering, self, arrived_ns, cursor)


class Metered:
    """A connection's rendering, counting and timing its token frames (see the module)."""

    __slots__ = ("_before", "_before_ns", "_inner", "_live_from", "_meter", "_token", "_ttft_from")

    def __init__(self, inner: Rendering, meter: Meter, arrived_ns: int, cursor: int) -> None:
        self._inner, self._meter = inner, meter
        self._token = inner.token                              # looked up once: it renders every token
        self._ttft_from = arrived_ns if cursor < 0 else 0      # 0: this connection's first token is no TTFT
        self._live_from = 0
        self._before, self._before_ns = -2, 0                  # the last sampled token before a gap, and when

    def opening(self, stream: Rendered, cursor: int) -> bytes:
        # Called once the connection is attached: what the log held then is replayed, the rest comes live.
        self._live_from = getattr(stream, "live_from", 0)
        return self._inner.opening(stream, cursor)

    def token(self, item: TokenItem) -> bytes:
        meter, index = self._meter, item.index
        meter.sent += 1
        if self._ttft_from:
            meter.ttft.observe_ns(_now() - self._ttft_from)
            self._ttft_from = 0
        phase = index & ITL_SAMPLE_MASK
        if phase == ITL_SAMPLE_MASK:                            # the token before a sampled gap
            if index >= self._live_from:
                self._before, self._before_ns = index, _now()
        elif phase == 0 and self._before == index - 1:         # the token after it: the gap is timed
            meter.itl.observe_ns(_now() - self._before_ns)
        return self._token(item)

    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes:
        return self._inner.closing(stream, delivered_from, dropped)
