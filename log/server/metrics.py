"""Prometheus metrics of one node: a per-node CollectorRegistry and its `/metrics` endpoint.

Each node owns a `NodeMetrics` (never the process-global registry: tests run several nodes in
one process). The hot path does one observation per request (`observe_request`: a histogram
labelled by API name, its child cached per API) and adds to two plain ints (bytes in/out,
exported at scrape time); everything that is state rather than an
event (under-replicated partitions, acks=all produce requests waiting, metadata offset and lag,
leadership changes) is read when Prometheus scrapes, by a collector holding getter callables,
so it costs nothing between scrapes.

The endpoint is prometheus_client's WSGI server on its own daemon thread (`serve`), bound to
the PLAINTEXT listener's host on `metrics.port` (0 = off); it only reads the registry, and the
collector's getters read plain ints/lengths from trio-owned objects (a racy read is harmless
for a gauge). `close()` shuts the thread's server down.

Metric names (prefix `quorumlog_`): request_latency_seconds{api}, requests_total{api} (the
histogram's _count), bytes_in_total, bytes_out_total, produce_acks_all_waiting,
under_replicated_partitions, isr_shrinks_total, isr_expands_total, leader_changes_total,
metadata_offset, metadata_lag, controller_commit_latency_seconds, partition_open_transactions,
last_stable_offset_lag_max.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

PREFIX = "quorumlog"
# Request latency buckets: sub-millisecond local calls up to acks=all waits and long-polls.
REQUEST_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
COMMIT_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
MAX_GETTERS = 64  # a limit on registered state getters (a handful per node)


class _StateCollector(Collector):
    """Gauges and counters read at scrape time from registered getters."""

    def __init__(self) -> None:
        self.gauges: dict[str, tuple[str, Callable[[], float]]] = {}
        self.counters: dict[str, tuple[str, Callable[[], float]]] = {}

    def collect(self) -> Iterator[Metric]:
        for name, (doc, getter) in list(self.gauges.items()):
            yield GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=getter())
        for name, (doc, getter) in list(self.counters.items()):
            yield CounterMetricFamily(f"{PREFIX}_{name}", doc, value=getter())


class NodeMetrics:
    """The metrics of one node; broker and controller parts register into the same registry."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.registry = CollectorRegistry(auto_describe=False)
        self._state = _StateCollector()
        self.registry.register(self._state)
        self.request_latency = Histogram(
            f"{PREFIX}_request_latency_seconds",
            "Kafka request handling time (decode to response), by API",
            ["api"],
            buckets=REQUEST_BUCKETS_S,
            registry=self.registry,
        )
        # Plain ints the connections add to (two per request: no lock, no metric object on
        # the hot path), read at scrape time like the state counters.
        self.bytes_in = 0
        self.bytes_out = 0
        self.counter("bytes_in", "Bytes read from Kafka clients", lambda: self.bytes_in)
        self.counter("bytes_out", "Bytes written to Kafka clients", lambda: self.bytes_out)
        self.isr_shrinks = Counter(
            f"{PREFIX}_isr_shrinks",
            "Committed ISR shrinks of led partitions",
            registry=self.registry,
        )
        self.isr_expands = Counter(
            f"{PREFIX}_isr_expands",
            "Committed ISR expands of led partitions",
            registry=self.registry,
        )
        self.controller_commit_latency = Histogram(
            f"{PREFIX}_controller_commit_latency_seconds",
            "Active controller: metadata batch propose -> commit",
            buckets=COMMIT_BUCKETS_S,
            registry=self.registry,
        )
        self._latency_by_api: dict[str, Histogram] = {}
        self._server: WSGIServer | None = None
        self.port: int | None = None

    # -- hot path: one call per request -------------------------------------------------------

    def observe_request(self, api_name: str, seconds: float) -> None:
        child = self._latency_by_api.get(api_name)
        if child is None:
            child = self._latency_by_api[api_name] = self.request_latency.labels(api_name)
        child.observe(seconds)

    # -- state read at scrape time ------------------------------------------------------------

    def gauge(self, name: str, doc: str, getter: Callable[[], float]) -> None:
        assert len(self._state.gauges) < MAX_GETTERS
        self._state.gauges[name] = (doc, getter)

    def counter(self, name: str, doc: str, getter: Callable[[], float]) -> None:
        assert len(self._state.counters) < MAX_GETTERS
        self._state.counters[name] = (doc, getter)

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes (what `/metrics` answers)."""
        return generate_latest(self.registry)

    # -- endpoint -----------------------------------------------------------------------------

    def serve(self, host: str, port: int) -> int:
        """Serve `/metrics` on host:port (0 picks a free port) from a daemon thread."""
        from prometheus_client import start_http_server

        assert self._server is None
        self._server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = self._server.server_port
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
