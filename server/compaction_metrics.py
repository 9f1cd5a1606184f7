"""Pulsar's compaction figures on the metrics endpoint.

Pulsar exports removed events, succeeded and failed runs, duration and read/write
throughput per topic (``pulsar_compaction_*``); these are the same under
``compactlog_compaction_*``. Counters and the duration histogram are updated when a
run ends; the throughput gauges are read from the last runs at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import Counter, Histogram

from compactlog.compactor.two_phase import CompactionRun
from compactlog.server.metrics import Metrics

DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

LastRuns = Callable[[], Iterable[tuple[str, CompactionRun]]]


class CompactionMetrics:
    def __init__(self, metrics: Metrics, last_runs: LastRuns) -> None:
        r = metrics.registry
        self.removed = Counter(
            "compactlog_compaction_removed_events",
            "Messages compaction left out (superseded, tombstones, keyless)",
            ["topic"],
            registry=r,
        )
        self.succeeded = Counter(
            "compactlog_compaction_succeeded",
            "Compaction runs that committed",
            ["topic"],
            registry=r,
        )
        self.failed_runs = Counter(
            "compactlog_compaction_failed", "Compaction runs that failed", ["topic"], registry=r
        )
        self.duration = Histogram(
            "compactlog_compaction_duration_seconds",
            "Compaction run time",
            ["topic"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.read_bytes = Counter(
            "compactlog_compaction_read_bytes", "Bytes compaction read", ["topic"], registry=r
        )
        self.written_bytes = Counter(
            "compactlog_compaction_written_bytes", "Bytes compaction wrote", ["topic"], registry=r
        )
        self._last_runs = last_runs
        metrics.add_gauges(
            "compactlog_compaction_read_throughput_bytes_per_second",
            "Read throughput of the last compaction run",
            self._throughput(True),
        )
        metrics.add_gauges(
            "compactlog_compaction_write_throughput_bytes_per_second",
            "Write throughput of the last compaction run",
            self._throughput(False),
        )

    def _throughput(self, read: bool) -> Callable[[], Iterable[tuple[dict[str, str], float]]]:
        def rows() -> Iterable[tuple[dict[str, str], float]]:
            for topic, run in self._last_runs():
                seconds = max(run.duration_ms, 1) / 1000.0
                yield {"topic": topic}, (run.bytes_in if read else run.bytes_out) / seconds

        return rows

    def succeeded_run(self, topic: str, run: CompactionRun) -> None:
        self.succeeded.labels(topic).inc()
        self.removed.labels(topic).inc(run.removed)
        self.duration.labels(topic).observe(run.duration_ms / 1000.0)
        self.read_bytes.labels(topic).inc(run.bytes_in)
        self.written_bytes.labels(topic).inc(run.bytes_out)

    def failed(self, topic: str, seconds: float) -> None:
        self.failed_runs.labels(topic).inc()
        self.duration.labels(topic).observe(seconds)
