"""What a Kafka handler needs of the server: the ``KafkaContext`` and Kafka topics.

A Kafka topic is a SEGMENTED topic: a non-partitioned one has partition 0; partition
``i`` of a partitioned topic ``NAME`` is the ordinary topic ``NAME-partition-i``. LEDGER
topics are not Kafka topics: asked for, they answer UNKNOWN_TOPIC_OR_PARTITION, and
the log says why (once a topic, so that a client's retries do not flood it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from compactlog.errors import TopicNotFound
from compactlog.partitioner import partition_name
from compactlog.server.broker import Broker
from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.server.kafka.group_coordinator import Coordinator
from compactlog.server.kafka.sasl import Door
from compactlog.server.log.waiting import TopicSignals
from compactlog.server.log.writer import LogWriters
from compactlog.storage.topic_log import TopicLog
from compactlog.storage.types import TopicKind

T = TypeVar("T")
log = logging.getLogger("compactlog.kafka")

NODE_ID = 0  # the one broker of the cluster this listener shows


@dataclass
class KafkaContext:
    """The server's pieces the listener shares with the gRPC Log service."""

    broker: Broker
    storage: Executor  # read steps, as the Log service's
    appends: Executor  # appends, as the Log service's
    signals: TopicSignals  # wake-ups of waiting readers (follow reads, long polls)
    host: str  # advertised to clients in Metadata
    port: int
    writers: LogWriters  # each log's writer of produces, as the Log service's own
    groups: Coordinator = field(default_factory=Coordinator)  # every consumer group
    door: Door | None = None  # --auth-tokens: every connection logs in with SASL
    _ledger_logged: set[str] = field(default_factory=set)

    def run(self, fn: Callable[..., T], *args: Any) -> Awaitable[T]:
        return asyncio.get_running_loop().run_in_executor(self.storage, fn, *args)

    def partitions(self, topic: str) -> int:
        """How many Kafka partitions ``topic`` has (``KafkaError`` when it is none)."""
        parted = self.broker.partitioned.get(topic)
        if parted is not None:
            self._check_kind(topic, parted.kind)
            return parted.partitions
        try:
            kind = self.broker.kind(topic)
        except TopicNotFound:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no topic {topic!r}") from None
        self._check_kind(topic, kind)
        return 1

    def log(self, topic: str, partition: int) -> TopicLog:
        """The ``TopicLog`` of Kafka partition ``partition`` of ``topic``."""
        count = self.partitions(topic)
        if not 0 <= partition < count:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                f"topic {topic!r} has {count} partition(s), not {partition}",
            )
        if self.broker.partitioned.get(topic) is None:
            return self.broker.log(topic)
        return self.broker.log(partition_name(topic, partition))

    def topic_names(self) -> list[str]:
        """Every Kafka topic: SEGMENTED topics that are not a partition of another, and
        SEGMENTED partitioned topics."""
        broker = self.broker
        names = [
            name
            for name in broker.segments.topic_names()
            if broker.parent_of(name) is None and broker.partitioned.get(name) is None
        ]
        parted = [
            name
            for name in broker.partitioned.names()
            if (p := broker.partitioned.get(name)) is not None and p.kind == TopicKind.SEGMENTED
        ]
        return sorted({*names, *parted})

    def _check_kind(self, topic: str, kind: TopicKind) -> None:
        if kind == TopicKind.SEGMENTED:
            return
        if topic not in self._ledger_logged:
            self._ledger_logged.add(topic)
            log.info(
                "kafka: topic %r is a LEDGER topic; Kafka clients reach SEGMENTED topics only "
                "(answered UNKNOWN_TOPIC_OR_PARTITION)",
                topic,
            )
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic!r} is a LEDGER topic")
