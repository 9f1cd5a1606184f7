"""Pulsar's compaction figures on the metrics endpoint, in base units.

Pulsar exports, per topic, removed events, succeeded and failed runs, duration, read and
write throughput and the compacted ledger's entries and size (``pulsar_compaction_*``);
these are the same under ``compactlog_compaction_*``: counters end in ``_total``, times
are seconds, sizes bytes. Runs of both designs count (a LogCleaner pass is a SEGMENTED
topic's compaction). Counters and the duration histogram move when a run ends; the
gauges are read at scrape time. A deleted topic's series are removed (``forget``), so a
topic that is gone is not reported with its last figures forever.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Protocol

from prometheus_client import Counter, Histogram

from compactlog.compactor.two_phase import CompactionRun
from compactlog.server.metrics import Metrics
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.views import compacted_state

DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

LastRuns = Callable[[], Iterable[tuple[str, CompactionRun]]]
Rows = Iterable[tuple[dict[str, str], float]]


class Topics(Protocol):
    ledgers: LedgerStore

    def topic_names(self) -> list[str]: ...


class CompactionMetrics:
    def __init__(self, metrics: Metrics, last_runs: LastRuns, broker: Topics) -> None:
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
        self._labelled = (
            self.removed,
            self.succeeded,
            self.failed_runs,
            self.duration,
            self.read_bytes,
            self.written_bytes,
        )
        self._last_runs = last_runs
        self._store = broker.ledgers
        self._topics = broker
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
        metrics.add_gauges(
            "compactlog_compaction_compacted_entries",
            "Messages in the topic's compacted ledger (LEDGER topics)",
            self._compacted(entries=True),
        )
        metrics.add_gauges(
            "compactlog_compaction_compacted_bytes",
            "Size of the topic's compacted ledger (LEDGER topics)",
            self._compacted(entries=False),
        )

    def _throughput(self, read: bool) -> Callable[[], Rows]:
        def rows() -> Rows:
            for topic, run in self._last_runs():
                seconds = max(run.duration_ms, 1) / 1000.0
                yield {"topic": topic}, (run.bytes_in if read else run.bytes_out) / seconds

        return rows

    def _compacted(self, entries: bool) -> Callable[[], Rows]:
        def rows() -> Rows:
            store = self._store
            for topic in store.topic_names():
                try:
                    state = compacted_state(store, topic)
                except Exception:  # deleted meanwhile, or its compacted ledger is missing
                    continue
                if state is None:
                    continue
                meta = store.ledger(state.ledger_id)
                size = meta.bytes if meta is not None else 0
                yield {"topic": topic}, float(state.entries if entries else size)

        return rows

    def _gone(self, topic: str) -> bool:
        """A run that ends after its topic was deleted must not bring its series back."""
        return topic not in self._topics.topic_names()

    def succeeded_run(self, topic: str, run: CompactionRun) -> None:
        if self._gone(topic):
            return
        self.succeeded.labels(topic).inc()
        self.removed.labels(topic).inc(run.removed)
        self.duration.labels(topic).observe(run.duration_ms / 1000.0)
        self.read_bytes.labels(topic).inc(run.bytes_in)
        self.written_bytes.labels(topic).inc(run.bytes_out)

    def failed(self, topic: str, seconds: float) -> None:
        if self._gone(topic):
            return
        self.failed_runs.labels(topic).inc()
        self.duration.labels(topic).observe(seconds)

    def forget(self, topic: str) -> None:
        """Remove every series of a deleted topic."""
        for metric in self._labelled:
            with contextlib.suppress(KeyError):  # no series for it yet
                metric.remove(topic)
