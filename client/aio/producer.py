"""``AsyncProducer``: the asyncio twin of ``TopicProducer``. ``await send(...)`` as
pulsar-client's asyncio producer has it, and ``send_async(content, callback)``, both
queued into PublishStream requests by ``AsyncSendBatches``; ``send_batch`` is one unary
Publish."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from compactlog.client import _convert as cv
from compactlog.client.aio.link import Link, acall
from compactlog.client.aio.send_batches import AsyncSendBatches, Partitions, Sent
from compactlog.client.errors import AlreadyClosed
from compactlog.client.message_id import MessageId
from compactlog.client.pulsar_params import check_ignored, pick
from compactlog.client.send_batches import BatchingSettings
from compactlog.client.send_replies import SendCallback
from compactlog.client.topic_producer import SEND_DEFAULTS, record_of

__all__ = ["AsyncProducer"]


class AsyncProducer:
    """Sends to one topic; ``await send(...)`` is durable when it returns, as
    pulsar-client's asyncio producer has it; ``flush()`` waits for every send begun
    (``asyncio.create_task(producer.send(...))``). ``send_async(content, callback)``
    is the sync producer's, for a caller that wants no future per message. Sends begun
    together go out together, in order, in PublishStream requests
    (``AsyncSendBatches``)."""

    def __init__(
        self,
        link: Link,
        topic: str,
        partitions: Partitions,
        producer_name: str | None = None,
        initial_sequence_id: int | None = None,
        batching: BatchingSettings | None = None,
    ) -> None:
        self._link = link
        self._topic = topic
        sequence = -1 if initial_sequence_id is None else initial_sequence_id
        self._batches = AsyncSendBatches(
            link.publish_encoded,
            partitions,
            link.metadata,
            link.address,
            link.timeout,
            topic,
            batching or BatchingSettings(),
            sequence,
        )
        self._queue_add = self._batches.queue_add  # one call per message
        self._name = producer_name or "producer-" + uuid.uuid4().hex[:12]
        self._in_flight: set[asyncio.Future[Any]] = set()
        self._closed = False

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        """The name given to ``create_producer``, else a generated unique one."""
        return self._name

    def last_sequence_id(self) -> int:
        """The sequence id of the last message sent (-1 before any, as pulsar-client)."""
        return self._batches.sequence

    async def send(
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
        """As ``TopicProducer.send``, with its parameters in its order."""
        if (
            ordering_key
            or replication_clusters
            or disable_replication
            or deliver_at
            or deliver_after
        ):
            check_ignored("send", pick(locals(), SEND_DEFAULTS), SEND_DEFAULTS)
        sent = Sent()
        self.send_async(content, sent, properties, partition_key, None, sequence_id, None,
                        False, event_timestamp)  # fmt: skip
        await self._batches.room()  # at once unless too many are unanswered
        return await sent

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
        """As ``TopicProducer.send_async``: queue the message and return;
        ``callback(Result.Ok, msg_id)`` once it is stored, ``callback(error, None)`` if
        its request failed, on the event loop, in order. Called from the loop's thread;
        it never waits for room (``flush`` bounds what is queued); ``send`` queues
        through it, its future the callback."""
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
            size = len(record.key or b"") + len(record.value or b"")
            self._batches.add_record(cv.record_to_pb(record), size, callback, sequence_id)
            return
        # Runs once per message: the common types first, without calls (as TopicProducer).
        value = content if type(content) is bytes else cv.to_bytes(content)
        key = partition_key
        if type(key) is not bytes:
            key = key.encode() if type(key) is str else cv.to_bytes(key)
        flags = self._queue_add(key, value, callback)
        if flags or sequence_id is not None:
            self._batches.added(flags, sequence_id)

    async def flush(self) -> None:
        """Wait until every send begun so far has been answered (its error is the send's).
        One yield first: tasks made before this call (``create_task(producer.send(...))``)
        run up to their request, in order, before flush looks at what is in flight."""
        await asyncio.sleep(0)
        await self._batches.flush()
        if self._in_flight:
            await asyncio.wait(list(self._in_flight))

    async def send_batch(self, records: Iterable[cv.RecordLike]) -> list[MessageId]:
        """Records in one all-or-nothing request; ids in request order."""
        if self._closed:
            raise AlreadyClosed("the producer is closed")
        link = self._link
        req = cv.publish_request(self._topic, records)
        call = link.stub.Publish(req, timeout=link.timeout, metadata=link.metadata)
        future = asyncio.ensure_future(acall("Publish", link.address, call))
        self._in_flight.add(future)
        future.add_done_callback(self._in_flight.discard)
        resp = await future
        return cv.ids_from_pb(resp.ids, False)

    async def close(self) -> None:
        """Flush, then refuse later sends."""
        await self.flush()
        self._closed = True
        await self._batches.close()
