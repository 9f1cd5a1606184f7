"""``TopicProducer``: the producer ``client.create_producer(topic)`` returns, with
pulsar-client's ``send(content, properties=None, partition_key=None, ...)``,
``send_async(content, callback, ...)`` (``callback(res, msg_id)``), ``flush()``,
``producer_name()`` and ``last_sequence_id()``.

``send_async`` queues the message; the queued messages go out together in PublishStream
requests, in order, and each callback is called when its message is stored
(``send_batches``); ``flush`` waits for every one handed over, and ``send`` for those
before it, so the two keep one order. Sequence ids are the client's count
(``initial_sequence_id``, then one more per send, or the ``sequence_id`` given): the
server neither stores them nor deduplicates by them.

It sends through a ``Producer`` (the older ``client.producer(topic)``, whose ``send``
takes the key first), so both shapes share one path to the wire, including the batched
``send_batch`` and the pipelined ``send_stream``. A partitioned topic routes each keyed
message by the key's murmur2 on the server (CONTRACT section 9); nothing is routed here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping

from compactlog.client import _convert as cv
from compactlog.client.closeable import Closeable
from compactlog.client.message_id import MessageId
from compactlog.client.producer import Producer
from compactlog.client.pulsar_params import check_ignored, pick
from compactlog.client.send_batches import BatchingSettings, SendBatches, SendCallback
from compactlog.records import Record

__all__ = ["SendCallback", "TopicProducer", "record_of"]

SEND_DEFAULTS: dict[str, object] = {
    "ordering_key": None,
    "replication_clusters": None,
    "disable_replication": False,
    "deliver_at": None,
    "deliver_after": None,
}


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

    def __init__(
        self,
        producer: Producer,
        producer_name: str | None = None,
        initial_sequence_id: int | None = None,
        batching: BatchingSettings | None = None,
    ) -> None:
        self._producer = producer
        self._name = producer_name or "producer-" + uuid.uuid4().hex[:12]
        sequence = -1 if initial_sequence_id is None else initial_sequence_id
        self._async = SendBatches(producer, batching or BatchingSettings(), sequence)
        self._queue_add = self._async.queue_add  # send_async's one call per message

    def topic(self) -> str:
        return self._producer.topic()

    def producer_name(self) -> str:
        """The name given to ``create_producer``, else a generated unique one."""
        return self._name

    def last_sequence_id(self) -> int:
        """The sequence id of the last message sent (-1 before any, as pulsar-client)."""
        return self._async.sequence

    def send(
        self,
        content: cv.BytesLike,
        properties: Mapping[str, str] | None = None,
        partition_key: str | bytes | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: object | None = None,
    ) -> MessageId:
        """Publish one message and return its id. ``content`` bytes (a ``str`` goes as
        UTF-8); ``partition_key`` the key that compaction keeps the latest value of;
        ``content=None`` with a key is a tombstone (deletes the key); ``event_timestamp``
        milliseconds since the epoch (``None``: the publish time). ``ordering_key``,
        replication and delayed delivery have no meaning here (``pulsar_params``)."""
        if (
            ordering_key
            or replication_clusters
            or disable_replication
            or deliver_at
            or deliver_after
        ):
            check_ignored("send", pick(locals(), SEND_DEFAULTS), SEND_DEFAULTS)
        record = record_of(content, partition_key, properties, event_timestamp)
        if self._async.unanswered:
            self._async.flush()  # what send_async queued goes first
        msg_id = MessageId.of(self._producer.send_batch([record])[0])
        self._async.sequenced(sequence_id)
        return msg_id

    def send_async(
        self,
        content: cv.BytesLike,
        callback: SendCallback,
        properties: Mapping[str, str] | None = None,
        partition_key: str | bytes | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: object | None = None,
    ) -> None:
        """Queue the message and return; ``callback(Result.Ok, msg_id)`` once it is
        stored, or ``callback(error, None)`` with the ``CompactlogError`` it met.
        Messages are stored and called back in the order they were given."""
        if (
            ordering_key
            or replication_clusters
            or disable_replication
            or deliver_at
            or deliver_after
        ):
            check_ignored("send_async", pick(locals(), SEND_DEFAULTS), SEND_DEFAULTS)
        if properties or event_timestamp:
            record = record_of(content, partition_key, properties, event_timestamp)
            self._async.add(record.key, record.value, callback, sequence_id, record)
            return
        # Runs once per message: the common types first, without calls.
        value = content if type(content) is bytes else cv.to_bytes(content)
        key = partition_key
        if type(key) is not bytes:
            key = key.encode() if type(key) is str else cv.to_bytes(key)
        flags = self._queue_add(key, value, callback)
        if flags or sequence_id is not None:
            self._async.added(flags, sequence_id)

    def send_batch(self, records: Iterable[cv.RecordLike]) -> list[MessageId]:
        """Records ``(key, value[, properties[, event_time_ms]])`` in one all-or-nothing
        request (the key first, as in ``Record``)."""
        return self._producer.send_batch(records)

    def send_stream(self, batches: Iterable[Iterable[cv.RecordLike]]) -> Iterator[list[MessageId]]:
        """Batches pipelined over one PublishStream (``Producer.send_stream``)."""
        return self._producer.send_stream(batches)

    def flush(self) -> None:
        """Send what ``send_async`` queued now and wait until every message handed over
        so far has been called back."""
        self._async.flush()

    def close(self) -> None:
        """Flush, then refuse later sends."""
        self._async.close()
        self._producer.close()
