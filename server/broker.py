"""One namespace of topics over the two storage engines.

The servicers talk to the Broker only; it routes each topic to the LEDGER store
(RocksDB) or the SEGMENTED log manager (segment files) and keeps names unique across
both. Synchronous and free of gRPC, so it is testable in-process.

It also owns the compaction worker pool (``compaction.workers`` processes, started on
demand) and its work directory ``<data dir>/compaction-work`` (SST files being written,
the workers' secondary instances), emptied at start-up: nothing there outlives a run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from compactlog.compactor.log_cleaner.log_cleaner import LogCleaner
from compactlog.compactor.log_cleaner.worker_pass import WorkerPasses
from compactlog.compactor.two_phase.as_of import AsOfView, last_at_or_before
from compactlog.compactor.two_phase.worker_runs import WorkerCompactions
from compactlog.compactor.worker_cores import CoreSplit
from compactlog.compactor.workers import WorkerPool
from compactlog.errors import (
    InvalidArgument,
    InvalidConfig,
    MalformedRequest,
    TopicExists,
    TopicNotFound,
    WrongTopicKind,
)
from compactlog.partitioner import parse_partition_name, partition_name
from compactlog.storage.config import (
    TOPIC_KEYS,
    ServerSettings,
    effective_topic_config,
    validate_topic_overrides,
)
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_log import LedgerTopicLog
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.names import check_topic_name
from compactlog.storage.partitioned_topics import PartitionedTopics
from compactlog.storage.segmented.manager import SegmentedLogManager
from compactlog.storage.segmented.topic_log import SegmentedTopicLog
from compactlog.storage.topic_log import ReadableLog, TopicLog
from compactlog.storage.types import MessageId, TopicKind
from compactlog.storage.views import compacted_state


@dataclass(frozen=True)
class TopicDescription:
    name: str
    kind: TopicKind
    config: dict[str, str]
    entries: int = 0
    bytes: int = 0
    ledgers: int = 0
    segments: int = 0
    first_id: MessageId | None = None
    last_id: MessageId | None = None
    compacted_entries: int = 0
    compacted_bytes: int = 0
    log_start_offset: int = 0
    extra: dict[str, int] = field(default_factory=dict)
    offline_reason: str = ""  # set: the topic's state could not be read (storage.offline)
    partitions: int = (
        0  # a partitioned topic: its partition count (server.admin.partitioned_topics)
    )
    overrides: tuple[str, ...] = ()  # the config keys set on the topic itself


WORK_DIR = "compaction-work"


class Broker:
    def __init__(
        self,
        data_dir: Path,
        settings: ServerSettings,
        clock: Callable[[], float] = time.time,
        holds: Callable[[str], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        # Which topic names this store holds: every one, but in a store slot under
        # partition placement, where a partitioned topic's partitions spread over slots
        # and the calls on NAME here act on the local ones (storage/slots.py).
        self.holds: Callable[[str], bool] = holds or (lambda _name: True)
        self.partitioned = PartitionedTopics(data_dir)  # partition counts (docs/partitions.md)
        self.ledgers = LedgerStore(data_dir / "ledgers", settings, clock)
        self.work_dir = data_dir / WORK_DIR
        WorkerCompactions.clear_work_dir(self.work_dir)
        cores = CoreSplit.plan(
            settings.worker_processes * settings.worker_threads,
            settings.compaction_worker_own_cores,
        )
        self.workers = WorkerPool(settings.worker_processes, cores)
        try:
            self.segments = SegmentedLogManager(data_dir / "segments", settings, clock)
            passes = WorkerPasses(self.workers, settings)
            self.cleaner = LogCleaner(self.segments, settings, clock, passes)
        except BaseException:
            self.ledgers.close()
            raise
        # Held while a name is taken or given up (partitioned topics take several at once).
        self.namespace_lock = threading.RLock()
        # Held while a topic's overrides are read, changed and written back, so that
        # concurrent changes of different keys all stay (else the last write drops the
        # others'); callers that read the config to plan a change hold it across both.
        self.config_lock = threading.RLock()
        self._close_hooks: list[Callable[[], None]] = []
        self._delete_hooks: list[Callable[[str], None]] = []

    # ---- namespace ------------------------------------------------------------------

    def kind(self, name: str) -> TopicKind:
        if self.ledgers.has_topic(name):
            return TopicKind.LEDGER
        if self.segments.has_topic(name):
            return TopicKind.SEGMENTED
        raise TopicNotFound(f"topic {name!r} does not exist", topic=name)

    def create_topic(self, name: str, kind: TopicKind, config: dict[str, str]) -> TopicDescription:
        check_topic_name(name)
        overrides = validate_topic_overrides(kind, config, name)
        with self.namespace_lock:
            if self.has_name(name):
                raise TopicExists(f"topic {name!r} already exists", topic=name)
            if kind == TopicKind.LEDGER:
                self.ledgers.create_topic(name, overrides)
                self._hold_for_compaction(name)
            else:
                self.segments.create_topic(name, overrides)
        return self.describe(name)

    def has_name(self, name: str) -> bool:
        """The name is taken: a topic of either store, or a partitioned topic."""
        return (
            self.ledgers.has_topic(name)
            or self.segments.has_topic(name)
            or self.partitioned.get(name) is not None
        )

    def partition_index(self, name: str) -> int | None:
        """``i`` when ``name`` is partition ``i`` of a partitioned topic, else None."""
        if self.partitioned.empty:
            return None
        return self.partitioned.partition_of(name, parse_partition_name(name))

    def held_partitions(self, name: str, partitions: int) -> list[int]:
        """The indices of ``name``'s partitions this store holds, in order."""
        return [i for i in range(partitions) if self.holds(partition_name(name, i))]

    def parent_of(self, name: str) -> str | None:
        """The partitioned topic ``name`` is a partition of, if it is one."""
        if self.partitioned.empty:
            return None
        parsed = parse_partition_name(name)
        if self.partitioned.partition_of(name, parsed) is None:
            return None
        assert parsed is not None
        return parsed[0]

    def update_config(
        self,
        name: str,
        set_: dict[str, str],
        remove: Sequence[str],
        validate_only: bool = False,
    ) -> TopicDescription:
        """Set and remove overrides of ``name``; ``validate_only``: every check, nothing
        written (Kafka's validate-only config changes)."""
        kind = self.kind(name)
        validated = validate_topic_overrides(kind, set_, name)
        for key in remove:
            if key not in TOPIC_KEYS[kind]:
                raise InvalidConfig(
                    f"unknown config key {key!r} for {kind.name} topics", topic=name, key=key
                )
        with self.config_lock:
            current = self.overrides(name)
            for key in remove:
                current.pop(key, None)
            current.update(validated)
            if validate_only:
                if kind == TopicKind.SEGMENTED:
                    self.segments.check_config(name, current)
            elif kind == TopicKind.LEDGER:
                self.ledgers.update_config(name, current)
                self._hold_for_compaction(name)
            else:
                self.segments.update_config(name, current)
        return self.describe(name)

    def _hold_for_compaction(self, name: str) -> None:
        """A compaction threshold needs the ``__compaction`` cursor from the earliest id,
        so that retention keeps every raw entry the compactor has not covered yet."""
        if self.ledgers.topic(name).config.compaction_threshold_bytes > 0:
            self.ledgers.open_cursor(name, COMPACTION_SUBSCRIPTION)

    def on_delete(self, hook: Callable[[str], None]) -> None:
        """Call ``hook(topic)`` after a topic was deleted (its metric series go)."""
        self._delete_hooks.append(hook)

    def on_close(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` first thing in ``close`` (stop background work using the stores)."""
        self._close_hooks.append(hook)

    def overrides(self, name: str) -> dict[str, str]:
        if self.kind(name) == TopicKind.LEDGER:
            return dict(self.ledgers.topic(name).overrides)
        return dict(self.segments.overrides(name))

    def delete_topic(self, name: str) -> None:
        parent = self.parent_of(name)
        if parent is not None:
            raise InvalidArgument(
                f"topic {name!r} is a partition of {parent!r}: delete {parent!r} instead",
                topic=name,
            )
        if self.kind(name) == TopicKind.LEDGER:
            self.ledgers.delete_topic(name)
        else:
            self.segments.delete_topic(name)
        for hook in self._delete_hooks:
            hook(name)

    def topic_names(self) -> list[str]:
        """Every topic, offline ones included."""
        offline = [*self.ledgers.offline_topics(), *self.segments.offline_topics()]
        return sorted(self.ledgers.topic_names() + self.segments.topic_names() + offline)

    def describe(self, name: str) -> TopicDescription:
        offline = self.ledgers.offline_topics().get(name) or self.segments.offline_topics().get(
            name
        )
        if offline is not None:
            return TopicDescription(name, offline.kind, {}, offline_reason=offline.reason)
        if self.kind(name) == TopicKind.LEDGER:
            return self._describe_ledger(name)
        return self._describe_segmented(name)

    def _describe_ledger(self, name: str) -> TopicDescription:
        topic = self.ledgers.topic(name)
        with topic.lock:
            entries, nbytes = topic.stats()
            desc = dict(
                name=name,
                kind=TopicKind.LEDGER,
                config=dict(topic.effective),
                overrides=tuple(sorted(topic.overrides)),
                entries=entries,
                bytes=nbytes,
                ledgers=len(topic.ledgers),
                first_id=topic.first_id(),
                last_id=topic.lac,
            )
        state = None
        try:
            state = compacted_state(self.ledgers, name)
        except Exception:  # a missing compacted ledger must not hide the topic's stats
            state = None
        if state is not None:
            meta = self.ledgers.ledger(state.ledger_id)
            desc.update(compacted_entries=state.entries, compacted_bytes=meta.bytes if meta else 0)
        return TopicDescription(**desc)  # type: ignore[arg-type]

    def _describe_segmented(self, name: str) -> TopicDescription:
        stats = self.segments.stats(name)
        overrides = self.segments.overrides(name)
        config = effective_topic_config(
            TopicKind.SEGMENTED, overrides, self.settings.defaults_for(TopicKind.SEGMENTED)
        )
        return TopicDescription(
            name=name,
            kind=TopicKind.SEGMENTED,
            config=config,
            overrides=tuple(sorted(overrides)),
            entries=stats.entries,
            bytes=stats.bytes,
            segments=stats.segments,
            first_id=MessageId(0, stats.first_offset) if stats.first_offset is not None else None,
            last_id=MessageId(0, stats.last_offset) if stats.last_offset is not None else None,
            log_start_offset=stats.log_start_offset,
        )

    # ---- data -----------------------------------------------------------------------

    def log(self, name: str) -> TopicLog:
        """The topic's ``TopicLog``, whatever its kind (what the Log service reads and
        appends through). A partition of a delete refused half-way is refused
        (``refuse_if_deleting``)."""
        self.refuse_if_deleting(name)
        partition = self.partition_index(name) or 0
        if self.ledgers.has_topic(name):
            return LedgerTopicLog(self.ledgers, name, partition)
        if self.segments.has_topic(name):
            return SegmentedTopicLog(self.segments, name, partition)
        raise TopicNotFound(f"topic {name!r} does not exist", topic=name)

    def refuse_if_deleting(self, name: str) -> None:
        """``NOT_FOUND`` / ``TOPIC_NOT_FOUND`` for a partition of a partitioned topic whose
        DeleteTopic was refused half-way (a file operation failed): the delete is decided
        (``NAME`` is gone), so what is left of it takes no publish, subscription or
        reader, and no read answers as if it were whole, until the next DeleteTopic of
        ``NAME`` or the next start finishes it (server.admin.partition_changes)."""
        change = self.partitioned.deleting(name)
        if change is not None:
            raise TopicNotFound(
                f"topic {name!r} is being deleted: a DeleteTopic of {change.name!r} was "
                "refused half-way and finishes at the next DeleteTopic of it or the next start",
                topic=name,
                deleting=change.name,
            )

    def as_of_view(
        self, name: str, as_of: MessageId | None, as_of_time_ms: int | None
    ) -> ReadableLog:
        """The compacted view of a LEDGER topic as of an id, or as of the last id published
        at or before a time (``as_of`` wins), for one Read (docs/reading-the-past.md).
        A partitioned ``NAME``'s past is read a partition at a time."""
        if self.partitioned.get(name) is not None:
            raise MalformedRequest(
                f"{name!r} is a partitioned topic: read the past of each partition "
                f"({partition_name(name, 0)} ...) on its own",
                request="ReadRequest",
                field="as_of",
                topic=name,
            )
        if self.kind(name) != TopicKind.LEDGER:
            raise WrongTopicKind(
                f"topic {name!r} is a SEGMENTED topic: as_of reads the past of LEDGER "
                "topics, whose raw history is kept",
                topic=name,
                kind="SEGMENTED",
            )
        if as_of is None and as_of_time_ms is not None:
            as_of = last_at_or_before(self.ledgers, name, as_of_time_ms)
        budget = self.settings.compaction_phase_one_memory_bytes
        return AsOfView(self.ledgers, name, as_of, budget, self.partition_index(name) or 0)

    def on_change(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(topic)`` whenever readers of a topic may have something new;
        a change of partition ``NAME-partition-i`` is also one of ``NAME`` (merged reads)."""

        def parent_changed(name: str) -> None:
            parent = self.parent_of(name)
            if parent is not None:
                callback(parent)

        for changes in (self.ledgers.changes, self.segments.changes):
            changes.add(callback)
            changes.add(parent_changed)

    def enforce_retention(self, name: str) -> TopicDescription:
        if self.kind(name) == TopicKind.LEDGER:
            self.ledgers.enforce_retention(name)
        else:
            self.segments.enforce_retention(name)
        return self.describe(name)

    def delete_records(self, name: str, before_offset: int) -> TopicDescription:
        if self.kind(name) == TopicKind.LEDGER:
            raise WrongTopicKind(
                f"topic {name!r} is a LEDGER topic: DeleteRecords applies to SEGMENTED topics",
                topic=name,
                kind="LEDGER",
            )
        self.segments.delete_records(name, before_offset)
        return self.describe(name)

    def start(self, warm_workers: bool = True) -> None:
        """Start background work owned by the storage side: the compaction workers when
        ``warm_workers`` (so the first run does not wait for a process start) and the
        LogCleaner threads."""
        if warm_workers:
            self.workers.warm()
        self.cleaner.start()

    def close(self) -> None:
        """Stop background work, then the workers (a pass or run still under way fails
        and cleans up while the stores are open), then close the stores."""
        for hook in reversed(self._close_hooks):
            hook()
        try:
            self.workers.close()
            WorkerCompactions.clear_secondaries(self.work_dir)  # kept open between jobs
            self.cleaner.stop()
            self.segments.close()
        finally:
            self.ledgers.close()
