"""``AsyncClient``: one ``grpc.aio`` channel, with ``Client``'s pulsar-client names as
coroutines (``create_producer``, ``subscribe``, ``create_reader``) and the admin calls a
program needs beside them. Same deadlines (``timeout``), same retries of idempotent
calls (the channel's service config), same error classes."""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Mapping
from types import TracebackType
from typing import Literal, Protocol, Self

from compactlog.channels import (
    ChannelSecurity,
    bearer_metadata,
    client_channel_options,
    open_aio_channel,
)
from compactlog.client import _convert as cv
from compactlog.client.aio.consumer import AsyncConsumer
from compactlog.client.aio.link import Link, acall
from compactlog.client.aio.multi_topic import AsyncMultiTopicConsumer
from compactlog.client.aio.producer import AsyncProducer
from compactlog.client.aio.reader import AsyncReader
from compactlog.client.aio.send_batches import PublishEncoded
from compactlog.client.batch_policy import ConsumerBatchReceivePolicy
from compactlog.client.consumer_state import ConsumerState
from compactlog.client.enums import ConsumerType, InitialPosition
from compactlog.client.errors import AlreadyClosed
from compactlog.client.message_id import MessageId
from compactlog.client.pulsar_params import (
    PRODUCER_DEFAULTS,
    READER_DEFAULTS,
    SUBSCRIBE_DEFAULTS,
    check_ignored,
    client_settings,
    pick,
)
from compactlog.client.reader_start import LastPosition, position_from_pb
from compactlog.client.send_batches import BatchingSettings
from compactlog.client.subscriptions import reset_cursor_request
from compactlog.client.types import CompactionStatus, TopicInfo
from compactlog.errors import CompactlogError
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


class AsyncCloseable(Protocol):
    """What the client closes with itself: producers, consumers, readers."""

    async def close(self) -> None: ...


__all__ = ["AsyncClient"]

_CHANNEL_OPTIONS = client_channel_options()
_WAIT_POLL_S = 0.1  # compact(wait=True) polls the status this often


class AsyncClient:
    """A connection to one server for asyncio code; ``async with`` or ``await close()``."""

    def __init__(
        self,
        service_url: str = "127.0.0.1:7650",
        authentication: object | None = None,
        operation_timeout_seconds: float = 30,
        io_threads: int = 1,
        message_listener_threads: int = 1,
        concurrent_lookup_requests: int = 50000,
        log_conf_file_path: str | None = None,
        stats_interval_in_seconds: int = 600,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        logger: object | None = None,
        connection_timeout_ms: int = 10000,
        listener_name: str | None = None,
        tls_private_key_file_path: str | None = None,
        tls_certificate_file_path: str | None = None,
        token: str | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        timeout: float | None = 30.0,
    ) -> None:
        """pulsar-client's ``Client`` parameters (its asyncio client takes the same), then
        this client's ``token``, ``tls_ca`` and ``timeout``, read as ``Client`` reads them
        (``pulsar_params.client_settings``)."""
        address, timeout, tls_ca = client_settings("AsyncClient", locals())
        self.address = address
        self.timeout = timeout
        security = ChannelSecurity.of(token, tls_ca)
        self._metadata = bearer_metadata(security)
        self._channel = open_aio_channel(address, security, _CHANNEL_OPTIONS)
        self._admin = pb_grpc.TopicAdminStub(self._channel)  # a TopicAdminAsyncStub
        stub = pb_grpc.LogStub(self._channel)  # a LogAsyncStub on an aio channel
        publish_encoded: PublishEncoded = self._channel.stream_stream(
            "/compactlog.v1.Log/PublishStream",
            request_serializer=None,
            response_deserializer=pb.PublishResponse.FromString,
        )
        self._link = Link(stub, publish_encoded, address, timeout, self._metadata)
        # closed with the client, as pulsar-client's close() closes what it made
        self._opened: weakref.WeakSet[AsyncCloseable] = weakref.WeakSet()
        self._closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every producer (its sends flushed), consumer (its queued acks stored) and
        reader made here, then the channel, as pulsar-client's ``close``; the first
        failure is raised once the channel is closed."""
        if not self._closed:
            self._closed = True
            failure: CompactlogError | None = None
            for thing in list(self._opened):
                try:
                    await thing.close()
                except CompactlogError as exc:
                    failure = failure or exc
            await self._channel.close()
            if failure is not None:
                raise failure

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("the client is closed")

    # -- admin -----------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        kind: Literal["ledger", "segmented"] | str = "ledger",
        config: Mapping[str, object] | None = None,
        partitions: int = 0,
    ) -> TopicInfo:
        """As ``Client.create_topic``."""
        self._check_open()
        req = pb.CreateTopicRequest(
            name=name,
            kind=cv.kind_to_pb(kind),
            config=cv.config_to_pb(config),
            partitions=partitions,
        )
        call = self._admin.CreateTopic(req, timeout=self.timeout, metadata=self._metadata)
        return cv.topic_from_pb(await acall("CreateTopic", self.address, call))

    async def get_topic(self, name: str) -> TopicInfo:
        self._check_open()
        req = pb.GetTopicRequest(name=name)
        call = self._admin.GetTopic(req, timeout=self.timeout, metadata=self._metadata)
        return cv.topic_from_pb(await acall("GetTopic", self.address, call))

    async def delete_topic(self, name: str) -> None:
        """As ``Client.delete_topic``: ``TopicNotFound`` if there is no such topic."""
        self._check_open()
        req = pb.DeleteTopicRequest(name=name)
        call = self._admin.DeleteTopic(req, timeout=self.timeout, metadata=self._metadata)
        await acall("DeleteTopic", self.address, call)

    async def compaction_status(self, topic: str) -> CompactionStatus:
        self._check_open()
        req = pb.GetCompactionStatusRequest(topic=topic)
        call = self._admin.GetCompactionStatus(req, timeout=self.timeout, metadata=self._metadata)
        return cv.status_from_pb(await acall("GetCompactionStatus", self.address, call))

    async def compact(self, topic: str, wait: bool = False) -> CompactionStatus:
        """Start a compaction; ``wait=True`` polls until the run has finished."""
        self._check_open()
        req = pb.CompactRequest(topic=topic, wait=False)
        call = self._admin.Compact(req, timeout=self.timeout, metadata=self._metadata)
        status = cv.status_from_pb(await acall("Compact", self.address, call))
        while wait and status.running:
            await asyncio.sleep(_WAIT_POLL_S)
            status = await self.compaction_status(topic)
        return status

    async def get_last_message_id(
        self, topic: str, read_compacted: bool = False
    ) -> MessageId | None:
        return (await self.last_position(topic, read_compacted)).id

    async def last_position(self, topic: str, read_compacted: bool = False) -> LastPosition:
        """As ``Client.last_position``."""
        self._check_open()
        req = pb.GetLastMessageIdRequest(topic=topic, read_compacted=read_compacted)
        call = self._link.stub.GetLastMessageId(req, timeout=self.timeout, metadata=self._metadata)
        resp = await acall("GetLastMessageId", self.address, call)
        return position_from_pb(resp)

    async def delete_subscription(self, topic: str, subscription: str) -> None:
        """Drop a subscription and its acknowledgements (``admin`` role)."""
        self._check_open()
        req = pb.DeleteSubscriptionRequest(topic=topic, subscription=subscription)
        call = self._admin.DeleteSubscription(req, timeout=self.timeout, metadata=self._metadata)
        await acall("DeleteSubscription", self.address, call)

    async def reset_cursor(
        self,
        topic: str,
        subscription: str,
        position: Literal["earliest", "latest"] | None = None,
        message_id: cv.MessageIdLike | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        """As ``Client.reset_cursor`` (``admin`` role)."""
        self._check_open()
        req = reset_cursor_request(topic, subscription, position, message_id, timestamp_ms)
        call = self._admin.ResetCursor(req, timeout=self.timeout, metadata=self._metadata)
        await acall("ResetCursor", self.address, call)

    # -- data ------------------------------------------------------------------------------

    async def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        schema: object | None = None,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30000,
        compression_type: object | None = None,
        max_pending_messages: int = 1000,
        max_pending_messages_across_partitions: int = 50000,
        block_if_queue_full: bool = False,
        batching_enabled: bool = False,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10,
        chunking_enabled: bool = False,
        message_routing_mode: object | None = None,
        lazy_start_partitioned_producers: bool = False,
        properties: dict[str, str] | None = None,
        batching_type: object | None = None,
        encryption_key: str | None = None,
        crypto_key_reader: object | None = None,
        access_mode: object | None = None,
    ) -> AsyncProducer:
        """As ``Client.create_producer`` (pulsar-client's parameters, the same checks)."""
        check_ignored("create_producer", pick(locals(), PRODUCER_DEFAULTS), PRODUCER_DEFAULTS)
        self._check_open()
        batching = BatchingSettings(
            batching_enabled,
            batching_max_messages,
            batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms,
        )

        async def partitions() -> int:
            return (await self.get_topic(topic)).partitions

        producer = AsyncProducer(
            self._link, topic, partitions, producer_name, initial_sequence_id, batching
        )
        self._opened.add(producer)
        return producer

    async def subscribe(
        self,
        topic: str | list[str],
        subscription_name: str,
        consumer_type: ConsumerType | str = ConsumerType.Exclusive,
        schema: object | None = None,
        message_listener: object | None = None,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50000,
        consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None,
        broker_consumer_stats_cache_time_ms: int = 30000,
        negative_ack_redelivery_delay_ms: int = 60000,
        is_read_compacted: bool = False,
        properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: int = 60,
        initial_position: InitialPosition = InitialPosition.Latest,
        crypto_key_reader: object | None = None,
        replicate_subscription_state_enabled: bool = False,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        start_message_id_inclusive: bool = False,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
        key_shared_policy: object | None = None,
        batch_index_ack_enabled: bool = False,
        regex_subscription_mode: object | None = None,
        dead_letter_policy: object | None = None,
        crypto_failure_action: object | None = None,
    ) -> AsyncConsumer | AsyncMultiTopicConsumer:
        """As ``Client.subscribe``: the same parameters and defaults (a new subscription
        starts at ``InitialPosition.Latest``); it exists when this returns. ``topic``: a
        name, or a list of names (one consumer on each, received from in turn)."""
        self._check_open()
        check_ignored("subscribe", pick(locals(), SUBSCRIBE_DEFAULTS), SUBSCRIBE_DEFAULTS)

        async def one(name: str) -> AsyncConsumer:
            state = ConsumerState(
                name,
                subscription_name,
                read_compacted=is_read_compacted,
                initial_position=initial_position,
                receiver_queue_size=receiver_queue_size,
                consumer_type=consumer_type,
                consumer_name=consumer_name,
                negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
                ack_timeout_ms=unacked_messages_timeout_ms or 0,
                batch_receive_policy=batch_receive_policy,
            )
            consumer = AsyncConsumer(self._link, state, self)
            self._opened.add(consumer)
            await consumer.subscribe_now()
            return consumer

        if isinstance(topic, str):
            return await one(topic)
        return AsyncMultiTopicConsumer([await one(name) for name in topic])

    async def create_reader(
        self,
        topic: str,
        start_message_id: MessageId | tuple[int, int],
        schema: object | None = None,
        reader_listener: object | None = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        crypto_key_reader: object | None = None,
        start_message_id_inclusive: bool = False,
    ) -> AsyncReader:
        """As ``Client.create_reader``, with its parameters in its order."""
        self._check_open()
        check_ignored("create_reader", pick(locals(), READER_DEFAULTS), READER_DEFAULTS)

        async def last_position() -> LastPosition:
            return await self.last_position(topic, read_compacted=is_read_compacted)

        reader = await AsyncReader.opening(
            self._link,
            topic,
            start_message_id,
            start_message_id_inclusive,
            is_read_compacted,
            last_position,
        )
        self._opened.add(reader)
        return reader
