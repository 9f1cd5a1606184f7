"""What a Kafka handler needs of the server: the ``KafkaContext`` and Kafka topics.

A Kafka topic is a SEGMENTED topic: a non-partitioned one has partition 0; partition
``i`` of a partitioned topic ``NAME`` is the ordinary topic ``NAME-partition-i``. LEDGER
topics are not Kafka topics: asked for, they answer UNKNOWN_TOPIC_OR_PARTITION, and
the log says why (once a topic, so that a client's retries do not flood it).

Under partition placement (``serve --shards N``, ``shards.placement = "partition"``) the
partitions of one ``NAME`` live in several store slots, each keeping ``NAME``'s record
(its partition count), so a broker finds a partition's log and the count in whichever
of its slots holds that partition; changes of such a ``NAME`` go through the server's
front (``FrontAdmin``), as gRPC's do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from compactlog.errors import TopicNotFound
from compactlog.partitioner import partition_name
from compactlog.server.broker import Broker
from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.server.kafka.group_coordinator import Coordinator, Group
from compactlog.server.kafka.peers import Peers
from compactlog.server.kafka.sasl import Door
from compactlog.server.log.waiting import TopicSignals
from compactlog.server.log.writer import LogWriters
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.storage.topic_log import TopicLog
from compactlog.storage.types import TopicKind

T = TypeVar("T")
FORWARDED: ContextVar[bool] = ContextVar("kafka_forwarded", default=False)  # from a peer
log = logging.getLogger("compactlog.kafka")

NODE_ID = 0  # the one broker of a server without shards


@dataclass(frozen=True)
class Cluster:
    """The Kafka brokers Metadata shows and which leads what (``serve --shards N``: one
    broker a shard, docs/kafka.md "With --shards N"); a server without shards is broker 0
    alone, leading everything."""

    node_id: int  # this listener's broker
    brokers: tuple[tuple[str, int], ...]  # each broker's advertised (host, port), by node id
    leader_of: Callable[[str], int] = lambda _name: NODE_ID  # a stored topic's broker
    coordinator_of: Callable[[str], int] = lambda _group: NODE_ID  # a group's coordinator

    @classmethod
    def alone(cls, host: str, port: int) -> Cluster:
        return cls(NODE_ID, ((host, port),))

    def leads(self, name: str) -> bool:
        return self.leader_of(name) == self.node_id

    def leader_of_partition(self, topic: str, partition: int) -> int:
        """The broker storing Kafka partition ``partition`` of ``topic``: partition 0 lives
        in the topic's own slot (a plain topic is its partition 0), partition ``i`` in
        ``NAME-partition-i``'s (under partition placement, another broker's)."""
        return self.leader_of(topic if partition == 0 else partition_name(topic, partition))


class FrontAdmin(Protocol):
    """The changes of topics under partition placement, made by the server's front through
    the calls gRPC's TopicAdmin takes (``server.front.spread``): the front places a
    partitioned topic's partitions over the slots, makes every slot agree and repairs a
    change cut half-way. ``validate_only``: the change checked by the front and every
    slot it touches, made nowhere (``server.admin.validation``). Implemented by the
    wiring (``server.shards.kafka_front``)."""

    async def create(
        self, name: str, config: dict[str, str], partitions: int, validate_only: bool = False
    ) -> int: ...

    async def add_partitions(self, name: str, total: int, validate_only: bool = False) -> None: ...

    async def delete(self, name: str) -> None: ...

    async def update_config(
        self, name: str, set_: dict[str, str], remove: Sequence[str]
    ) -> None: ...


@dataclass(frozen=True)
class Store:
    """One store this listener serves: its broker, the writers of its produces and the
    signals that wake its waiting fetches (a shard serves several: one a store slot)."""

    broker: Broker
    writers: LogWriters  # each log's writer of produces, as the Log service's own
    signals: TopicSignals  # wake-ups of waiting readers (follow reads, long polls)


@dataclass
class KafkaContext:
    """The server's pieces the listener shares with the gRPC Log service."""

    stores: dict[int, Store]  # by store slot; a server without shards: {0: its store}
    storage: Executor  # read steps, as the Log service's
    appends: Executor  # appends, as the Log service's
    cluster: Cluster
    slot_of: Callable[[str], int] = lambda _name: 0  # the store slot holding a topic
    groups: Coordinator = field(default_factory=Coordinator)  # every consumer group
    door: Door | None = None  # --auth-tokens: every connection logs in with SASL
    peers: Peers | None = None  # the other brokers of a sharded server
    front: FrontAdmin | None = None  # partition placement: topic changes go to the front
    _ledger_logged: set[str] = field(default_factory=set)

    def store_of(self, name: str) -> Store:
        """The store holding topic ``name``: NOT_LEADER_OR_FOLLOWER when another broker
        leads it, UNKNOWN_TOPIC_OR_PARTITION when no store here is its home."""
        if not self.cluster.leads(name):
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"{name!r} is led by broker {self.cluster.leader_of(name)}, not by this one",
            )
        store = self.stores.get(self.slot_of(name))
        if store is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no topic {name!r} here")
        return store

    def group(self, group_id: str) -> Group:
        """Group ``group_id``, coordinated here: NOT_COORDINATOR when another broker
        coordinates it (a request another broker sent on has been checked there)."""
        node = self.cluster.coordinator_of(group_id)
        if node != self.cluster.node_id and not FORWARDED.get():
            raise KafkaError(
                ErrorCode.not_coordinator, f"group {group_id!r} is coordinated by broker {node}"
            )
        return self.groups.get(group_id)

    def broker_of(self, name: str) -> Broker:
        return self.store_of(name).broker

    def next_change(self, name: str) -> asyncio.Future[None]:
        """A future done at the next append to (or change of) stored topic ``name``."""
        return self.store_of(name).signals.next_change(name)

    @property
    def settings_broker(self) -> Broker:
        """A broker to read the server's settings from (every store has the same)."""
        return next(iter(self.stores.values())).broker

    @property
    def stopping(self) -> bool:
        return any(store.signals.stopping.is_set() for store in self.stores.values())

    def run(self, fn: Callable[..., T], *args: Any) -> Awaitable[T]:
        return asyncio.get_running_loop().run_in_executor(self.storage, fn, *args)

    def partitions(self, topic: str) -> int:
        """How many Kafka partitions ``topic`` has (``KafkaError`` when it is none)."""
        parted = self.record(topic)
        if parted is not None:
            return parted.partitions
        broker = self.broker_of(topic)
        try:
            kind = broker.kind(topic)
        except TopicNotFound:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no topic {topic!r}") from None
        self._check_kind(topic, kind)
        return 1

    def record(self, topic: str) -> PartitionedTopic | None:
        """``topic``'s record as a partitioned topic, from any store here that keeps it
        (its own slot's; under partition placement each slot holding a partition keeps
        one); None for a plain or unknown topic. A LEDGER one is ``KafkaError``."""
        for store in self.stores.values():
            parted = store.broker.partitioned.get(topic)
            if parted is not None:
                self._check_kind(topic, parted.kind)
                return parted
        return None

    def recorded(self) -> dict[str, int]:
        """Every SEGMENTED partitioned topic a store here keeps a record of, with the
        greatest count among them (under partition placement each slot holding one of
        its partitions keeps one, so the count outlives its own broker's restart)."""
        found: dict[str, int] = {}
        for store in self.stores.values():
            for name, parted in _partitioned(store.broker):
                found[name] = max(found.get(name, 0), parted.partitions)
        return found

    def log(self, topic: str, partition: int) -> TopicLog:
        """The ``TopicLog`` of Kafka partition ``partition`` of ``topic``
        (NOT_LEADER_OR_FOLLOWER when another broker stores it)."""
        count = self.partitions(topic)
        if not 0 <= partition < count:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                f"topic {topic!r} has {count} partition(s), not {partition}",
            )
        if count == 1:  # partitioned topics have two or more
            return self.broker_of(topic).log(topic)
        name = partition_name(topic, partition)
        return self.broker_of(name).log(name)

    def topic_names(self) -> list[str]:
        """Every Kafka topic of the stores here: SEGMENTED topics that are not a partition
        of another (nor of a delete refused half-way), and SEGMENTED partitioned topics
        whose own slot is here (under partition placement other slots keep the record
        too; the topic is listed once, by its own broker)."""
        found: set[str] = set()
        for slot, store in self.stores.items():
            found.update(_plain_names(store.broker))
            found.update(
                name for name, _p in _partitioned(store.broker) if self.slot_of(name) == slot
            )
        return sorted(found)

    def local_partitions(self) -> list[tuple[str, list[int]]]:
        """Every Kafka partition the stores here hold, by topic (under partition
        placement a partitioned topic's other partitions are other brokers')."""
        found: dict[str, set[int]] = {}
        for store in self.stores.values():
            broker = store.broker
            for name in _plain_names(broker):
                found.setdefault(name, set()).add(0)
            for name, parted in _partitioned(broker):
                held = broker.held_partitions(name, parted.partitions)
                found.setdefault(name, set()).update(held)
        return [(name, sorted(found[name])) for name in sorted(found) if found[name]]

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


def _plain_names(broker: Broker) -> list[str]:
    """The SEGMENTED topics of ``broker`` that are Kafka topics of one partition."""
    return [
        name
        for name in broker.segments.topic_names()
        if broker.parent_of(name) is None
        and broker.partitioned.get(name) is None
        and broker.partitioned.deleting(name) is None
    ]


def _partitioned(broker: Broker) -> list[tuple[str, PartitionedTopic]]:
    """The SEGMENTED partitioned topics ``broker`` keeps a record of."""
    return [
        (name, parted)
        for name in broker.partitioned.names()
        if (parted := broker.partitioned.get(name)) is not None
        and parted.kind == TopicKind.SEGMENTED
    ]
