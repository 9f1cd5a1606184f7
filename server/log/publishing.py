"""What a topic's writer does with a group of publishes: parse, append, count.

``log.writer`` queues the requests and wakes the event loop; this is the work it runs on
the appends executor for each group. Each request's bytes are checked once by the batch
codec (``batch.publish_topic``, which also reads the topic; a malformed one, or one with a
property that is not UTF-8, gets its own error before anything of it is stored);
consecutive requests for one log are appended together through it
(``TopicLog.append_requests``: one group-commit ticket on LEDGER topics), those of a
partitioned topic one by one across its partitions (``log.partitioned_publish``). The
metrics of a request are counted once it is answered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from compactlog.server.broker import Broker
from compactlog.server.log.partitioned_publish import RoundRobin, append_spread
from compactlog.server.log.writer import Accepted, LogWriters, Written
from compactlog.server.metrics import Metrics
from compactlog.server.rpc.convert import publish_reply
from compactlog.storage.batch import publish_topic
from compactlog.storage.chains import until_failed
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.storage.spanning import marker_of
from compactlog.storage.topic_log import Appended, IdRun


class Publishing:
    """The writers of one Log service and the group work they run."""

    def __init__(self, broker: Broker, metrics: Metrics, executor: Executor) -> None:
        self.broker = broker
        self.metrics = metrics
        self.robin = RoundRobin()  # keyless records of partitioned topics
        self.spanning = False  # a slot of a sharded server: honour spanning-part markers
        self.writers = LogWriters(
            self._write_group, executor, self._answered, broker.ledgers.group_commit
        )
        self._counters: dict[str, tuple[Any, Any, Any, Any]] = {}

    def _write_group(self, topic: str, raws: list[bytes], chains: list[int]) -> list[Written]:
        """A writer's group of requests for ``topic`` (on the appends executor): one
        result per request, in order (see the module's docstring)."""
        named = until_failed(raws, chains, publish_topic)
        out: list[Written] = []
        run: list[tuple[bytes, str, int]] = []  # parsed, for one log, not yet written
        for raw, chain, topic_or_error in zip(raws, chains, named, strict=True):
            if isinstance(topic_or_error, Exception):
                self._append_run(run, out)
                out.append(topic_or_error)
                continue
            if run and run[0][1] != topic_or_error:
                self._append_run(run, out)
            run.append((raw, topic_or_error, chain))
        self._append_run(run, out)
        return out

    def _append_run(self, run: list[tuple[bytes, str, int]], out: list[Written]) -> None:
        """Append ``run`` (requests for one topic, in order) and empty it."""
        if not run:
            return
        topic, raws, chains = run[0][1], [r[0] for r in run], [r[2] for r in run]
        run.clear()
        try:
            parted = self.broker.partitioned.get(topic)
            if parted is not None:
                out.extend(self._spread(parted, raws, chains))
                return
            log = self.broker.log(topic)
        except Exception as exc:  # the topic does not exist, is offline...
            out.extend([exc] * len(raws))
            return
        parts = [(raw, marker_of(raw) if self.spanning else None) for raw in raws]
        kind, partition = log.kind.name, log.partition
        for appended in log.append_requests(parts, chains):
            if isinstance(appended, Exception):
                out.append(appended)
            else:
                records = _records(appended.runs)
                out.append(Accepted(appended, _reply_of(appended, partition), kind, records))

    def _spread(
        self, parted: PartitionedTopic, raws: list[bytes], chains: list[int]
    ) -> list[Written]:
        """Each request across the partitions, one by one (a chain stops at a failure)."""
        spreads = until_failed(
            raws, chains, lambda raw: append_spread(self.broker, parted, raw, self.robin)
        )
        return [
            s
            if isinstance(s, Exception)
            else Accepted(s, s.reply, parted.kind.name, _records(s.runs))
            for s in spreads
        ]

    def _answered(self, accepted: Accepted, size: int, seconds: float) -> None:
        """The metrics of a request answered (on the thread that saw its group durable)."""
        counters = self._counters.get(accepted.kind)
        if counters is None:
            m = self.metrics
            counters = self._counters[accepted.kind] = (
                m.publish_requests.labels(accepted.kind),
                m.publish_records.labels(accepted.kind),
                m.publish_bytes.labels(accepted.kind),
                m.publish_latency.labels(accepted.kind),
            )
        requests, records, nbytes, latency = counters
        requests.inc()
        records.inc(accepted.records)
        nbytes.inc(size)
        latency.observe(seconds)


def _records(runs: Sequence[IdRun]) -> int:
    return sum(run[2] for run in runs)


def _reply_of(appended: Appended, partition: int) -> Callable[[], bytes]:
    return lambda: publish_reply(appended.runs, appended.synced, partition)
