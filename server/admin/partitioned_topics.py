"""Partitioned topics in the broker's namespace: create, grow, describe, configure, delete.

A partitioned topic ``NAME`` is N ordinary topics ``NAME-partition-i`` plus its partition
count, kept in ``storage.partitioned_topics``; a change of the partition set is made whole
across crashes by ``partition_changes``. The calls here act on every partition this store
holds (``Broker.holds``). See docs/partitions.md ("Inside the server").
"""

from __future__ import annotations

from collections.abc import Sequence

from compactlog.errors import InvalidArgument, InvalidTopicName, TopicExists, TopicNotFound
from compactlog.partitioner import parse_partition_name, partition_name
from compactlog.server.admin.partition_changes import PartitionChanges
from compactlog.server.broker import Broker, TopicDescription
from compactlog.storage.config import validate_topic_overrides
from compactlog.storage.names import check_topic_name
from compactlog.storage.partitioned_topics import Op, PartitionedTopic, PendingChange
from compactlog.storage.types import TopicKind

# A sane bound: every partition is a topic with its own files and cursors.
MAX_PARTITIONS = 10_000


class PartitionedNamespace:
    """The partitioned-topic calls of the admin and log services, over one ``Broker``."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.changes = PartitionChanges(broker)

    def get(self, name: str) -> PartitionedTopic | None:
        return self.broker.partitioned.get(name)

    def require(self, name: str) -> PartitionedTopic:
        topic = self.get(name)
        if topic is None:
            raise TopicNotFound(f"partitioned topic {name!r} does not exist", topic=name)
        return topic

    def local(self, name: str) -> list[tuple[int, str]]:
        """``(i, NAME-partition-i)`` of the partitions this store holds, in order."""
        topic = self.require(name)
        return [
            (i, partition_name(name, i))
            for i in self.broker.held_partitions(name, topic.partitions)
        ]

    def partition_names(self, name: str) -> list[str]:
        """``NAME-partition-i`` of the partitions this store holds, in partition order."""
        return [part for _i, part in self.local(name)]

    # ---- namespace ------------------------------------------------------------------

    def create(
        self, name: str, kind: TopicKind, config: dict[str, str], partitions: int
    ) -> TopicDescription:
        with self.broker.namespace_lock:
            self.check(name, kind, config, partitions)
            change = PendingChange(name, Op.CREATE, partitions, kind, dict(config))
            self.changes.apply(change, None)
        return self.describe(name)

    def check(self, name: str, kind: TopicKind, config: dict[str, str], partitions: int) -> None:
        """Every check of ``create``, nothing created (a validate-only create); a bad name,
        count or config starts nothing."""
        check_topic_name(name)
        check_partitioned_name(name)
        _check_count(name, partitions)
        validate_topic_overrides(kind, config, name)
        with self.broker.namespace_lock:
            self._finish_pending(name)
            if self.broker.has_name(name):
                raise TopicExists(f"topic {name!r} already exists", topic=name)
            self._check_free(name, 0, partitions)

    def create_plain(self, name: str, kind: TopicKind, config: dict[str, str]) -> TopicDescription:
        """A topic of its own (not partitioned), refused when its name is a partition's
        of a partitioned topic here (``check_not_a_partition``)."""
        check_topic_name(name)
        with self.broker.namespace_lock:
            self.check_not_a_partition(name)
            return self.broker.create_topic(name, kind, config)

    def check_plain(self, name: str, kind: TopicKind, config: dict[str, str]) -> None:
        """Every check of ``create_plain``, nothing created (a validate-only create)."""
        check_topic_name(name)
        validate_topic_overrides(kind, config, name)
        with self.broker.namespace_lock:
            self.check_not_a_partition(name)
            if self.broker.has_name(name):
                raise TopicExists(f"topic {name!r} already exists", topic=name)

    def check_not_a_partition(self, name: str) -> None:
        """``NAME-partition-i`` is refused as a topic of its own while ``NAME`` is a
        partitioned topic (or a change of it is pending), whatever its count: a later
        AddPartitions would otherwise take the topic in as a partition (Pulsar refuses
        such names likewise). ``INVALID_ARGUMENT`` / ``INVALID_TOPIC_NAME``."""
        parsed = parse_partition_name(name)
        if parsed is None:
            return
        base = parsed[0]
        if self.get(base) is None and self.broker.partitioned.pending_of(base) is None:
            return
        raise InvalidTopicName(
            f"topic name {name!r} is a partition's name of the partitioned topic {base!r}: "
            f"its partitions are made by CreateTopic or AddPartitions of {base!r}, not one "
            "by one",
            topic=name,
            partitioned_topic=base,
        )

    def add_partitions(
        self, name: str, total: int, validate_only: bool = False
    ) -> TopicDescription:
        """Grow to ``total`` partitions (never shrink); existing partitions keep their data.
        New partitions take partition 0's topic config. ``validate_only``: every check
        (the new names free too), nothing created (Kafka's validate-only CreatePartitions)."""
        broker = self.broker
        with broker.namespace_lock:
            self._finish_pending(name)
            if self.get(name) is None and broker.has_name(name):
                raise InvalidArgument(
                    f"topic {name!r} is not partitioned: partitions are set when a topic "
                    "is created",
                    topic=name,
                    field="partitions",
                )
            topic = self.require(name)
            if total < topic.partitions:
                raise InvalidArgument(
                    f"topic {name!r} has {topic.partitions} partitions: the count can grow, "
                    f"never shrink (asked for {total})",
                    topic=name,
                    field="partitions",
                )
            _check_count(name, total)
            if validate_only:
                self._check_free(name, topic.partitions, total)
            elif total > topic.partitions:
                held = self.partition_names(name)  # the lowest one's config: partition 0's
                config = broker.overrides(held[0]) if held else {}
                self._check_free(name, topic.partitions, total)
                change = PendingChange(name, Op.GROW, total, topic.kind, config)
                self.changes.apply(change, topic)
        return self.describe(name)

    def _check_free(self, name: str, first: int, total: int) -> None:
        """Every name checked and free first, so a bad one starts nothing. A topic of its
        own already under a new partition's name is refused, never taken in as the
        partition: its data and subscriptions are not the partitioned topic's."""
        for part in (partition_name(name, i) for i in range(first, total)):
            check_topic_name(part)
            if self.broker.has_name(part):
                raise TopicExists(
                    f"topic {part!r} already exists as a topic of its own: {name!r} cannot "
                    "take it as a partition (delete it first)",
                    topic=part,
                    partitioned_topic=name,
                )

    def _finish_pending(self, name: str) -> PendingChange | None:
        """A change of ``name`` a crash or a failure left pending, finished first (so
        the call sees its outcome); that change, if any."""
        change = self.broker.partitioned.pending_of(name)
        if change is not None:
            self.changes.finish(change)
        return change

    def finish_pending(self) -> list[PendingChange]:
        """At start: the changes a crash cut short, rolled forward (``partition_changes``)."""
        with self.broker.namespace_lock:
            return self.changes.finish_pending()

    def update_config(
        self,
        name: str,
        set_: dict[str, str],
        remove: Sequence[str],
        validate_only: bool = False,
    ) -> TopicDescription:
        names = self.partition_names(name)
        for part in names:  # validated on the first; the others take the same change
            self.broker.update_config(part, set_, remove, validate_only)
        return self.describe(name)

    def deletes(self, name: str) -> bool:
        """A DeleteTopic of ``name`` is this namespace's: ``name`` is partitioned, or a
        delete of it failed half-way and is still to finish."""
        change = self.broker.partitioned.pending_of(name)
        return self.get(name) is not None or (change is not None and change.op is Op.DELETE)

    def delete(self, name: str) -> None:
        """A DeleteTopic a failure left half-way is finished by this one (answered OK)."""
        broker = self.broker
        with broker.namespace_lock:
            cut = self._finish_pending(name)
            if cut is not None and cut.op is Op.DELETE:
                return
            topic = self.require(name)
            self.changes.apply(PendingChange(name, Op.DELETE, topic.partitions, topic.kind), topic)

    # ---- description ----------------------------------------------------------------

    def describe(self, name: str) -> TopicDescription:
        """The (held) partitions' figures summed; the config is the lowest one's, partition
        0's but in a slot without it (UpdateTopicConfig on ``NAME`` keeps them equal); first
        and last ids are per partition, so unset; ``partitions`` is the full count."""
        topic = self.require(name)
        parts = [self.broker.describe(part) for part in self.partition_names(name)]
        config = parts[0].config if parts else {}
        return TopicDescription(
            name=name,
            kind=topic.kind,
            config=config,
            overrides=parts[0].overrides if parts else (),
            entries=sum(p.entries for p in parts),
            bytes=sum(p.bytes for p in parts),
            ledgers=sum(p.ledgers for p in parts),
            segments=sum(p.segments for p in parts),
            compacted_entries=sum(p.compacted_entries for p in parts),
            compacted_bytes=sum(p.compacted_bytes for p in parts),
            offline_reason="; ".join(
                f"{p.name}: {p.offline_reason}" for p in parts if p.offline_reason
            ),
            partitions=topic.partitions,
        )


def check_partitioned_name(name: str) -> None:
    """A partitioned topic's own name is never a partition's (``X-partition-N``): its
    partitions would be named ``X-partition-N-partition-i``, and ``X-partition-N`` itself
    would read as partition N of ``X`` (Pulsar refuses such names likewise).
    ``INVALID_ARGUMENT`` / ``INVALID_TOPIC_NAME``."""
    if parse_partition_name(name) is not None:
        raise InvalidTopicName(
            f"topic name {name!r} is a partition's name (NAME-partition-i): a partitioned "
            "topic cannot take it, as its partitions add '-partition-i' to it",
            topic=name,
        )


def _check_count(name: str, partitions: int) -> None:
    if not 2 <= partitions <= MAX_PARTITIONS:
        raise InvalidArgument(
            f"a partitioned topic has 2 to {MAX_PARTITIONS} partitions, not {partitions}",
            topic=name,
            field="partitions",
        )
