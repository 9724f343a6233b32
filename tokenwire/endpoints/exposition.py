"""``GET /metrics``: the counts of ``metering``, the registry and the token log, in Prometheus's text format.

How this works: nothing is counted through ``prometheus_client`` as it
happens; at scrape time a ``Collector`` (a custom collector, as
prometheus_client calls one) reads the plain ints and ``Buckets`` the
endpoints (``Meter``), the registry (open streams), the token log (tokens
logged: ``MemoryTokenLog.appended``, or the Redis writers' acknowledged
appends) and the Redis log (takeovers, each round's time) keep, and yields
them as metric families.  Each app has its own ``CollectorRegistry``, not
prometheus_client's global one: two apps in one process expose their own
figures and never collide.  A server of several processes (uvicorn
``--workers``, gunicorn) has one set of figures per process, and
prometheus_client's multiprocess mode does not gather them (nothing is
written to its files): run one process per port and scrape each.
``prometheus_client`` is imported only here, when metrics are asked for
(``pip install 'tokenwire[metrics]'``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .decisions import Answer
from .metering import Meter
from .params import RequestError

if TYPE_CHECKING:
    from .registry import Registry

__all__ = ["EXTRA_HINT", "METRICS", "Collector", "Exposition", "exposition", "metrics_installed", "require_prometheus"]

EXTRA_HINT = "metrics need prometheus_client: pip install 'tokenwire[metrics]'"

# Every family exposed: name, kind, what it means (the README's table).
METRICS: tuple[tuple[str, str, str], ...] = (
    ("tokenwire_streams_open", "gauge", "Event streams being written now."),
    ("tokenwire_streams_created_total", "counter", "Streams made here (POST /streams, GET /stream, POST /chat)."),
    ("tokenwire_tokens_logged_total", "counter", "Tokens this process appended to the token log."),
    ("tokenwire_tokens_sent_total", "counter", "Token frames written to readers (replays included)."),
    ("tokenwire_time_to_first_token_seconds", "histogram",
     "From a request's arrival to its first token frame, for a connection that reads from the first token."),
    ("tokenwire_inter_token_latency_seconds", "histogram",
     "Gap between consecutive live token frames of one connection, before each token whose index is a multiple "
     "of 8."),
    ("tokenwire_resumes_total", "counter",
     "Event streams opened after a cursor the reader holds (Last-Event-ID, startIndex, starting_after)."),
    ("tokenwire_refusals_total", "counter", "Requests the endpoints refused, by status."),
    ("tokenwire_takeovers_total", "counter",
     "Leases won here on a stream with tokens logged that this process did not hold (Redis)."),
    ("tokenwire_log_round_seconds", "histogram", "Time of one Redis write round of the token log (a Redis log only)."),
)
_HELP = {name: help_text for name, _, help_text in METRICS}


def _prometheus() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core  # noqa: F401 - the metric families, read as prometheus_client.core
    except ImportError:
        raise ImportError(EXTRA_HINT) from None
    return prometheus_client


def metrics_installed() -> bool:
    """Whether ``prometheus_client`` can be imported (the ``metrics`` extra)."""
    return importlib.util.find_spec("prometheus_client") is not None


def require_prometheus() -> None:
    """Raise ``ImportError`` naming the ``metrics`` extra when ``prometheus_client`` is not installed."""
    _prometheus()


class Collector:
    """Reads one app's counts at scrape time (prometheus_client's custom-collector interface: ``collect``)."""

    def __init__(self, meter: Meter, registry: Registry, open_streams: Callable[[], int]) -> None:
        self.meter, self.registry, self.open_streams = meter, registry, open_streams

    def describe(self) -> Iterator[Any]:
        """The families ``collect`` yields: asked once, at registration, so a ``?name[]=`` scrape finds them."""
        return self.collect()

    def collect(self) -> Iterator[Any]:
        core = _prometheus().core
        meter, registry = self.meter, self.registry
        aio = registry.aio if registry.aio is not None else getattr(registry.log, "aio", None)
        appended, rounds = aio.figures() if aio is not None else (getattr(registry.log, "appended", 0), None)
        yield core.GaugeMetricFamily("tokenwire_streams_open", _HELP["tokenwire_streams_open"],
                                     value=self.open_streams())
        for name, value in (("tokenwire_streams_created_total", meter.created),
                            ("tokenwire_tokens_logged_total", appended),
                            ("tokenwire_tokens_sent_total", meter.sent),
                            ("tokenwire_resumes_total", meter.resumed),
                            ("tokenwire_takeovers_total", aio.takeovers if aio is not None else 0)):
            yield core.CounterMetricFamily(name.removesuffix("_total"), _HELP[name], value=value)
        refusals = core.CounterMetricFamily("tokenwire_refusals", _HELP["tokenwire_refusals_total"],
                                            labels=["status"])
        for status, count in sorted(meter.refused.items()):
            refusals.add_metric([str(status)], count)
        yield refusals
        histograms = [("tokenwire_time_to_first_token_seconds", meter.ttft),
                      ("tokenwire_inter_token_latency_seconds", meter.itl)]
        if rounds is not None:          # a Redis log: its writer's rounds
            histograms.append(("tokenwire_log_round_seconds", rounds))
        for name, buckets in histograms:
            yield core.HistogramMetricFamily(name, _HELP[name], buckets=buckets.cumulative(),
                                             sum_value=buckets.sum_ns / 1e9)


class Exposition:
    """One app's ``CollectorRegistry`` (its own, never the global one) and its scrape."""

    def __init__(self, collector: Collector) -> None:
        prometheus = _prometheus()
        self.prometheus = prometheus
        self.registry = prometheus.CollectorRegistry(auto_describe=False)
        self.registry.register(collector)

    def answer(self, names: list[str] | None = None) -> Answer:
        """The scrape: every sample, or only those ``names`` names (``?name[]=``, as prometheus_client filters)."""
        chosen = self.registry if names is None else self.registry.restricted_registry(names)
        body: bytes = self.prometheus.generate_latest(chosen)
        return Answer(200, (("content-type", self.prometheus.CONTENT_TYPE_LATEST), ("cache-control", "no-store")),
                      body)


def exposition(meter: Meter | None, registry: Registry, open_streams: Callable[[], int]) -> Exposition:
    """The scrape of an app with ``meter``; raises ``RequestError`` 404 (metrics off) or 501 (no prometheus_client)."""
    if meter is None:
        raise RequestError(404, "this app serves no metrics: make it with TokenStreams(metrics=True) "
                                "(pip install 'tokenwire[metrics]')")
    try:
        return Exposition(Collector(meter, registry, open_streams))
    except ImportError:
        raise RequestError(501, f"{EXTRA_HINT}, then restart the server") from None
