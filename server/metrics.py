"""Prometheus figures, on their own registry, served by ``--metrics-listen``."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.publish_requests = Counter(
            "compactlog_publish_requests", "Publish requests", ["kind"], registry=r
        )
        self.publish_records = Counter(
            "compactlog_publish_records", "Records published", ["kind"], registry=r
        )
        self.publish_bytes = Counter(
            "compactlog_publish_bytes", "Record bytes published", ["kind"], registry=r
        )
        self.publish_latency = Histogram(
            "compactlog_publish_latency_seconds",
            "Publish request latency, durable",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.read_requests = Counter(
            "compactlog_read_requests", "Read streams opened", ["kind", "compacted"], registry=r
        )
        self.read_messages = Counter(
            "compactlog_read_messages", "Messages sent by Read", ["kind", "compacted"], registry=r
        )
        self.read_batch_latency = Histogram(
            "compactlog_read_batch_latency_seconds",
            "Time to assemble one Read response (storage scan + encoding)",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.consume_messages = Counter(
            "compactlog_consume_messages", "Messages delivered by Consume", registry=r
        )
        self.acknowledge_requests = Counter(
            "compactlog_acknowledge_requests",
            "Acknowledge requests (each a synced cursor write)",
            ["cumulative"],
            registry=r,
        )
        self.acknowledge_list_requests = Counter(
            "compactlog_acknowledge_list_requests",
            "AcknowledgeList requests (each one cursor write per log its ids name)",
            registry=r,
        )
        self.acknowledge_list_ids = Counter(
            "compactlog_acknowledge_list_ids",
            "Ids acknowledged individually through AcknowledgeList requests",
            registry=r,
        )
        self.rpc_errors = Counter(
            "compactlog_rpc_errors", "RPCs answered with an error", ["method", "code"], registry=r
        )

    def add_gauges(
        self, name: str, doc: str, read: Callable[[], Iterable[tuple[dict[str, str], float]]]
    ) -> None:
        """Export figures that other parts keep (compactor, cleaner) at scrape time."""
        self.registry.register(_Gauges(name, doc, read))

    def serve(self, listen: str) -> int:
        host, _, port = listen.rpartition(":")
        server, _thread = start_http_server(
            int(port), addr=host or "127.0.0.1", registry=self.registry
        )
        return int(server.server_port)


class _Gauges(Collector):
    def __init__(
        self, name: str, doc: str, read: Callable[[], Iterable[tuple[dict[str, str], float]]]
    ) -> None:
        self.name, self.doc, self.read = name, doc, read

    def collect(self) -> Iterable[Metric]:
        rows = list(self.read())
        labels = sorted({k for lab, _ in rows for k in lab})
        family = GaugeMetricFamily(self.name, self.doc, labels=labels)
        for lab, value in rows:
            family.add_metric([lab.get(k, "") for k in labels], value)
        yield family
