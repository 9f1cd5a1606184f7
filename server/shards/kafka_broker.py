"""A shard's Kafka broker: the Kafka listener over every store slot the shard serves.

Shard ``k`` of ``serve --kafka-listen ... --shards N`` is Kafka broker ``k``: it serves the
socket the front bound for it (``kafka_ports``) with one ``KafkaContext`` over its slots'
stores, and leads the partitions stored in them. Who leads a partition needs no table: the
stored topic's slot (``storage.slots.slot_of``) is owned by shard ``slot % N``, which is
its broker; under partition placement that spreads one topic's partitions over the
brokers, and the broker makes topic changes through the front (``kafka_front``).
Decisions in docs/kafka.md ("With --shards N").
"""

from __future__ import annotations

import socket

from compactlog.server.kafka.listener import KafkaListener
from compactlog.server.kafka.peers import Peers
from compactlog.server.kafka.topics import Cluster
from compactlog.server.security.guard import Guard
from compactlog.server.serving import ServedStore
from compactlog.server.shards.kafka_front import FrontTopics
from compactlog.storage.slots import Placement, shard_of, slot_of


class ShardBroker:
    """Broker ``node`` of ``brokers`` (advertised addresses by node id)."""

    def __init__(
        self,
        fd: int,
        node: int,
        brokers: tuple[tuple[str, int], ...],
        peers: Peers,
        slot_count: int,
        placement: Placement,
        front: str | None = None,
    ) -> None:
        self.fd = fd
        self.peers = peers
        self.slot_count = slot_count
        self.placement = placement
        self.front_address = front  # the front's gRPC address: topic changes (kafka_front)
        self.front: FrontTopics | None = None
        self.cluster = Cluster(node, brokers, self.leader_of, self.leader_of)

    def slot_of(self, name: str) -> int:
        return slot_of(name, self.slot_count, self.placement)

    def leader_of(self, name: str) -> int:
        """The broker (shard) that stores topic ``name``; also the coordinator of the
        group named ``name`` (groups spread over the brokers by the same hash)."""
        return shard_of(self.slot_of(name), len(self.cluster.brokers))

    async def listen(self, served: dict[int, ServedStore], guard: Guard) -> KafkaListener:
        """The listener over ``served`` (bound stores, by slot) on the inherited socket,
        not serving yet (``start``)."""
        first = next(iter(served.values()))
        stores = {slot: store.kafka_store() for slot, store in served.items()}
        ctx = first.kafka_context(self.cluster, stores)
        ctx.slot_of = self.slot_of
        ctx.peers = self.peers
        tls_root = None
        if guard.options.tls_cert is not None:
            tls_root = guard.options.tls_cert.read_bytes()
            self.peers.trust(tls_root)
        if self.placement is Placement.PARTITION and self.front_address is not None:
            self.front = FrontTopics(self.front_address, self.peers.secret, tls_root)
            ctx.front = self.front
        listener = KafkaListener(ctx)
        await listener.adopt(socket.socket(fileno=self.fd), guard.ssl_context())
        return listener
