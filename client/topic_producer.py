"""``TopicProducer``: the producer ``client.create_producer(topic)`` returns, with
pulsar-client's ``send(value, partition_key=None, properties=None, event_timestamp=None)``.

It sends through a ``Producer`` (the older ``client.producer(topic)``, whose ``send``
takes the key first), so both shapes share one path to the wire, including the batched
``send_batch`` and the pipelined ``send_stream``. A partitioned topic routes each keyed
message by the key's murmur2 on the server (CONTRACT section 9); nothing is routed here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from compactlog.client import _convert as cv
from compactlog.client.closeable import Closeable
from compactlog.client.message_id import MessageId
from compactlog.client.producer import Producer
from compactlog.records import Record

__all__ = ["TopicProducer", "record_of"]


def record_of(
    value: cv.BytesLike,
    partition_key: str | bytes | None = None,
    properties: Mapping[str, str] | None = None,
    event_timestamp: int | None = None,
) -> Record:
    """The record of a pulsar-client ``send``: the key is the partition key, ``None`` as
    the value with a key is a tombstone, no event timestamp means the publish time."""
    return Record(cv.to_bytes(partition_key), cv.to_bytes(value), properties, event_timestamp or 0)


class TopicProducer(Closeable):
    """Sends to one topic; ``send`` is durable when it returns."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    def topic(self) -> str:
        return self._producer.topic()

    def send(
        self,
        value: cv.BytesLike,
        partition_key: str | bytes | None = None,
        properties: Mapping[str, str] | None = None,
        event_timestamp: int | None = None,
    ) -> MessageId:
        """Publish one message and return its id. ``value`` bytes (a ``str`` goes as
        UTF-8); ``partition_key`` the key that compaction keeps the latest value of;
        ``value=None`` with a key is a tombstone (deletes the key); ``event_timestamp``
        milliseconds since the epoch (``None``: the publish time)."""
        record = record_of(value, partition_key, properties, event_timestamp)
        return MessageId.of(self._producer.send_batch([record])[0])

    def send_batch(self, records: Iterable[cv.RecordLike]) -> list[MessageId]:
        """Records ``(key, value[, properties[, event_time_ms]])`` in one all-or-nothing
        request (the key first, as in ``Record``)."""
        return self._producer.send_batch(records)

    def send_stream(self, batches: Iterable[Iterable[cv.RecordLike]]) -> Iterator[list[MessageId]]:
        """Batches pipelined over one PublishStream (``Producer.send_stream``)."""
        return self._producer.send_stream(batches)

    def flush(self) -> None:
        """Nothing is buffered here: every send is on the server when it returns."""

    def close(self) -> None:
        self._producer.close()
