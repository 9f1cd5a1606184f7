"""What the ports of Pulsar's client suites share: a client of the shared server, topics
made plain or partitioned, and publishing and draining as upstream's loops do."""

from __future__ import annotations

from compactlog.client import Client, Message, MessageId, Timeout
from compactlog.client.consumer import Consumer


def make_topic(client: Client, name: str, partitions: int = 0, **config: object) -> str:
    client.create_topic(name, config=config or None, partitions=partitions)
    return name


def publish(client: Client, topic: str, count: int, prefix: str = "test-") -> list[MessageId]:
    """``count`` keyed messages ``test-0`` ... (the keys spread them over partitions)."""
    producer = client.create_producer(topic)
    ids = [producer.send(f"{prefix}{i}".encode(), partition_key=f"k{i}") for i in range(count)]
    producer.close()
    return ids


def drain(consumer: Consumer, timeout_ms: int = 300) -> list[Message]:
    """Everything the consumer receives until ``timeout_ms`` pass with nothing."""
    got: list[Message] = []
    while True:
        try:
            got.append(consumer.receive(timeout_ms))
        except Timeout:
            return got


def values(messages: list[Message]) -> list[str]:
    return [m.data().decode() for m in messages]  # type: ignore[union-attr]
