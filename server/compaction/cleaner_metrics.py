"""Kafka's LogCleaner figures on the metrics endpoint, in base units.

Kafka's ``kafka.log:type=LogCleaner`` and ``LogCleanerManager`` gauges under
``compactlog_log_cleaner_*``, read at scrape time: percentages become ratios 0-1,
milliseconds and seconds become ``_seconds``, the pass count is a ``_total`` counter. The
table of Kafka's names against ours is in docs/metrics.md ("LogCleaner").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from compactlog.compactor.log_cleaner.log_cleaner import CleanerStats
from compactlog.server.metrics import Metrics

GAUGES: tuple[tuple[str, str, str], ...] = (
    ("max_buffer_utilization_ratio", "max_buffer_utilization",
     "Largest offset map utilisation over the last pass of each cleaner thread"),
    ("recopy_ratio", "recopy_ratio", "Bytes written / bytes read by the last pass"),
    ("max_clean_time_seconds", "max_clean_time_s",
     "Longest pass time over the last pass of each cleaner thread"),
    ("max_dirty_ratio", "max_dirty_ratio",
     "Largest dirty ratio among the compacted topics at the last selection"),
    ("time_since_last_run_seconds", "time_since_last_run_s",
     "Time since a cleaner thread last looked for work or ran a pass"),
    ("uncleanable_partitions", "uncleanable_count",
     "Topics the cleaner skips after a failed pass"),
    ("throughput_bytes_per_second", "last_throughput_bytes_per_s",
     "Bytes read and written per second by the last pass"),
)  # fmt: skip
PREFIX = "compactlog_log_cleaner_"


class CleanerCollector(Collector):
    def __init__(self, stats: Callable[[], CleanerStats]) -> None:
        self.stats = stats

    def collect(self) -> Iterable[Metric]:
        stats = self.stats()
        for name, field, doc in GAUGES:
            yield GaugeMetricFamily(PREFIX + name, doc, value=float(getattr(stats, field)))
        yield CounterMetricFamily(PREFIX + "passes", "Cleaner passes run", value=stats.passes)


def export_cleaner_stats(stats: Callable[[], CleanerStats], metrics: Metrics) -> None:
    metrics.registry.register(CleanerCollector(stats))
