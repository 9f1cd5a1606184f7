"""``Client``: one gRPC channel to a compactlog server, the admin calls (``admin``), and
factories with pulsar-client's names (CONTRACT section 13): ``create_producer``,
``subscribe``, ``create_reader``, ``create_table_view``. The first names of this client
stay: ``producer(topic)`` (``send(key, value)``) and ``reader(topic, start=...)`` (an
iterator), and ``subscribe`` also takes its older arguments (``read_compacted=``,
``initial_position="earliest"``).

Idempotent calls (reads, admin gets) are retried by gRPC itself when no server answered
(``UNAVAILABLE``), through the channel's service config (``channels.retry_service_config``).

Every call has a deadline (CONTRACT section 12): unary calls take the client's
``timeout`` (seconds, default 30; ``None`` = no deadline, for callers that bound calls
themselves), a Consume its ``wait_ms`` on top; a stream is bounded while the client waits
for something the server owes it at once (its start; each response of a bounded read;
each PublishStream reply), not over a follow read's whole life (``deadlines``). A call
past its deadline raises ``Timeout``. Every ``grpc.RpcError`` leaves as a
``compactlog.errors`` class.

A server started with ``--auth-tokens`` wants ``token=``; one with ``--tls-cert`` wants
``tls_ca=``, the CA certificate file (PEM) that signed its certificate (docs/security.md).
"""

from __future__ import annotations

import os
import weakref
from typing import Literal, TypeVar, cast

from compactlog.channels import ChannelSecurity, client_channel_options, open_channel
from compactlog.client import _convert as cv
from compactlog.client.admin import AdminCalls
from compactlog.client.batch_policy import ConsumerBatchReceivePolicy
from compactlog.client.closeable import Closeable, close_all
from compactlog.client.consumer import Consumer
from compactlog.client.consumer_state import ConsumerState
from compactlog.client.deadlines import Watchdog
from compactlog.client.enums import ConsumerType, InitialPosition
from compactlog.client.errors import AlreadyClosed, call
from compactlog.client.message import Message
from compactlog.client.message_id import MessageId
from compactlog.client.multi_topic import MultiTopicConsumer
from compactlog.client.producer import Producer
from compactlog.client.pulsar_params import (
    PRODUCER_DEFAULTS,
    READER_DEFAULTS,
    SUBSCRIBE_DEFAULTS,
    check_ignored,
    client_settings,
    pick,
)
from compactlog.client.reader import Reader, StartLike
from compactlog.client.reader_start import AtTime, LastPosition
from compactlog.client.send_batches import BatchingSettings
from compactlog.client.shard_routes import ClientLog, RoutedLog, Routes
from compactlog.client.subscriptions import SubscriptionCalls
from compactlog.client.table_view import PartitionWatch, Source, TableView
from compactlog.client.topic_producer import TopicProducer
from compactlog.client.topic_reader import TopicReader
from compactlog.errors import InvalidArgument
from compactlog.partitioner import partition_name
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

DEFAULT_ADDRESS = "127.0.0.1:7650"
DEFAULT_TIMEOUT_S = 30.0  # every call's deadline (CONTRACT sections 12, 13); None = none

_CHANNEL_OPTIONS = client_channel_options()
C = TypeVar("C", bound=Closeable)
_POSITIONS = {"earliest": InitialPosition.Earliest, "latest": InitialPosition.Latest}


class Client(AdminCalls, SubscriptionCalls, Closeable):
    """A connection to one server. Use as a context manager or call ``close()``."""

    def __init__(
        self,
        service_url: str = DEFAULT_ADDRESS,
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
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> None:
        """pulsar-client's parameters, then this client's: ``token`` (``authentication``
        objects are pulsar-client's own: give the token here), ``tls_ca`` (also
        ``tls_trust_certs_file_path``) and ``timeout``, every call's deadline in seconds
        (``operation_timeout_seconds`` when that is not its default 30)."""
        address, timeout, tls_ca = client_settings("Client", locals())
        self.address = address
        self.timeout = timeout
        self._watchdog = Watchdog()
        security = ChannelSecurity.of(token, tls_ca)
        self._channel = open_channel(address, security, _CHANNEL_OPTIONS)
        self._admin = pb_grpc.TopicAdminStub(self._channel)
        self._log = ClientLog(self._channel)
        self._routes = Routes(
            self._log,
            self._admin,
            lambda owner: open_channel(owner, security, _CHANNEL_OPTIONS),
            timeout,
        )
        self._opened: weakref.WeakSet[Closeable] = weakref.WeakSet()  # closed with the client
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close every producer, consumer, reader and table view made here, then the
        channel (as pulsar-client's ``close``)."""
        if not self._closed:
            self._closed = True
            try:
                close_all(list(self._opened))  # a consumer's queued acks are stored first
            finally:
                self._watchdog.close()
                self._routes.close()
                self._channel.close()

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("the client is closed")

    def _log_of(self, topic: str) -> ClientLog:
        """The Log service of ``topic``'s owner (``shard_routes``): straight to the shard."""
        return cast(ClientLog, RoutedLog(self._routes, topic))

    def _opening(self, thing: C) -> C:
        self._opened.add(thing)
        return thing

    def get_key_history(self, topic: str, key: bytes, max_messages: int = 0) -> list[Message]:
        """Every raw message of ``key``, oldest first, tombstones included (at most
        ``max_messages``, 0 = no limit; a response stops before 4 MiB)."""
        self._check_open()
        req = pb.GetKeyHistoryRequest(topic=topic, key=key, max_messages=max_messages)
        log = self._log_of(topic)
        resp = call(
            "GetKeyHistory",
            self.address,
            lambda: log.GetKeyHistory(req, timeout=self.timeout),
        )
        return [cv.message_from_pb(m, topic) for m in resp.messages]

    # -- data ----------------------------------------------------------------------------

    def producer(self, topic: str) -> Producer:
        """A producer for ``topic``; the topic must exist (no auto-creation). For a
        partitioned topic (``GetTopic``) the producer routes records to partitions itself."""
        self._check_open()
        partitions = self.get_topic(topic).partitions
        producer = Producer(
            self._log_of(topic), topic, self.address, self.timeout, self._watchdog, partitions
        )
        return self._opening(producer)

    def reader(
        self,
        topic: str,
        start: StartLike = "earliest",
        start_timestamp_ms: int | None = None,
        read_compacted: bool = False,
        follow: bool = False,
        max_messages: int = 0,
        as_of: MessageId | tuple[int, int] | None = None,
        as_of_time_ms: int | None = None,
    ) -> Reader:
        """Iterate messages from ``start`` (inclusive id, or earliest/latest) or a publish time.

        Without ``follow`` the iteration ends after the last message that existed when the
        read began; ``max_messages`` = 0 means no limit. Closing the reader cancels the stream.
        ``as_of`` (an id) or ``as_of_time_ms`` (the last id published at or before it), with
        ``read_compacted``: the compacted view as a compaction at that point would have
        written it (LEDGER topics).
        """
        self._check_open()
        reader = Reader(
            self._log_of(topic),
            topic,
            self.address,
            start=start,
            start_timestamp_ms=start_timestamp_ms,
            read_compacted=read_compacted,
            follow=follow,
            max_messages=max_messages,
            timeout=self.timeout,
            watchdog=self._watchdog,
            as_of=as_of,
            as_of_time_ms=as_of_time_ms,
        )
        return self._opening(reader)

    def subscribe(
        self,
        topic: str | list[str],
        subscription_name: str,
        consumer_type: ConsumerType | str | bool = ConsumerType.Exclusive,
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
        initial_position: InitialPosition | Literal["earliest", "latest"] = InitialPosition.Latest,
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
        *,
        read_compacted: bool | None = None,
    ) -> Consumer | MultiTopicConsumer:
        """A consumer on the durable subscription ``subscription_name``, created now (at
        ``initial_position``, pulsar-client's default ``Latest``) if it does not exist.

        ``topic``: a name, or a list of names (one consumer on each, received in turn).
        ``consumer_type`` (a ``ConsumerType``, or its name: ``"shared"``) and
        ``consumer_name`` (``None``: a unique generated one) are CONTRACT section 6's;
        ``unacked_messages_timeout_ms``: messages not acknowledged within it go out
        again; ``negative_acknowledge`` redelivers after ``negative_ack_redelivery_delay_ms``.
        The parameters without a meaning here take pulsar-client's defaults only
        (``pulsar_params``). ``read_compacted=`` (and a bool third argument) are this
        client's older spelling of ``is_read_compacted``."""
        self._check_open()
        check_ignored("subscribe", pick(locals(), SUBSCRIBE_DEFAULTS), SUBSCRIBE_DEFAULTS)
        if isinstance(consumer_type, bool):  # subscribe(topic, name, read_compacted), v1
            is_read_compacted, consumer_type = consumer_type, ConsumerType.Exclusive
        if read_compacted is not None:
            is_read_compacted = read_compacted
        if isinstance(initial_position, str):
            if initial_position not in _POSITIONS:
                raise InvalidArgument(
                    f"initial_position must be 'earliest' or 'latest', not {initial_position!r}"
                )
            initial_position = _POSITIONS[initial_position]

        def one(name: str) -> Consumer:
            state = ConsumerState(
                name,
                subscription_name,
                read_compacted=is_read_compacted,
                initial_position=initial_position,  # type: ignore[arg-type]
                receiver_queue_size=receiver_queue_size,
                consumer_type=consumer_type,  # type: ignore[arg-type]
                consumer_name=consumer_name,
                negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
                ack_timeout_ms=unacked_messages_timeout_ms or 0,
                batch_receive_policy=batch_receive_policy,
            )
            consumer = Consumer(self._log_of(name), state, self.address, self.timeout, self)
            consumer.subscribe_now()
            return consumer

        if isinstance(topic, str):
            return self._opening(one(topic))
        return self._opening(MultiTopicConsumer([one(name) for name in topic]))

    def create_producer(
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
    ) -> TopicProducer:
        """A producer with pulsar-client's ``send(content, properties=None,
        partition_key=None, ...)``; ``send_timeout_millis`` bounds each send (0: no
        bound); ``batching_*`` shape the requests ``send_async`` gathers
        (``send_batches``); the parameters without a meaning here take pulsar-client's
        defaults only."""
        check_ignored("create_producer", pick(locals(), PRODUCER_DEFAULTS), PRODUCER_DEFAULTS)
        if send_timeout_millis < 0:
            raise InvalidArgument("send_timeout_millis is milliseconds >= 0")
        self._check_open()
        partitions = self.get_topic(topic).partitions
        timeout = send_timeout_millis / 1000 if send_timeout_millis else None
        log = self._log_of(topic)
        producer = Producer(log, topic, self.address, timeout, self._watchdog, partitions)
        batching = BatchingSettings(
            batching_enabled,
            batching_max_messages,
            batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms,
        )
        made = TopicProducer(producer, producer_name, initial_sequence_id, batching)
        return self._opening(made)

    def create_reader(
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
    ) -> TopicReader:
        """Read ``topic`` from ``MessageId.earliest``, ``MessageId.latest`` or after an id
        (that id too when ``start_message_id_inclusive``), following new messages, up to
        ``receiver_queue_size`` read ahead. ``reader_name`` only names it (a reader
        keeps no server-side state)."""
        self._check_open()
        check_ignored("create_reader", pick(locals(), READER_DEFAULTS), READER_DEFAULTS)

        def open_reader(start: StartLike | AtTime) -> Reader:
            if isinstance(start, AtTime):
                return self.reader(
                    topic, "earliest", start.ms, read_compacted=is_read_compacted, follow=True
                )
            return self.reader(topic, start, read_compacted=is_read_compacted, follow=True)

        def last_position() -> LastPosition:
            return self.last_position(topic, read_compacted=is_read_compacted)

        def first_at(timestamp_ms: int, partition: int | None) -> MessageId | None:
            name = topic if partition is None else partition_name(topic, partition)
            with self.reader(
                name, "earliest", timestamp_ms, read_compacted=is_read_compacted, max_messages=1
            ) as peek:
                return next((msg.message_id() for msg in peek), None)

        reader = TopicReader(
            open_reader,
            start_message_id,
            start_message_id_inclusive,
            last_position,
            first_at,
            queue_size=receiver_queue_size,
            name=reader_name,
        )
        return self._opening(reader)

    def create_table_view(
        self, topic: str, *, partitions_update_interval_seconds: float = 60
    ) -> TableView:
        """The latest value of every key of ``topic``, kept up to date by a thread
        (``table_view``); returns once the compacted view is loaded. A partitioned topic's
        view looks for added partitions every ``partitions_update_interval_seconds``
        (pulsar-client's partitionsUpdateInterval, 60 s)."""
        info = self.get_topic(topic)
        names = [partition_name(topic, i) for i in range(info.partitions)] or [topic]
        sources = [self._table_source(name) for name in names]
        watch = PartitionWatch(
            lambda: self.get_topic(topic).partitions,
            lambda i: self._table_source(partition_name(topic, i)),
            partitions_update_interval_seconds,
        )
        table = TableView(topic, sources, info.kind == "ledger", watch if info.partitions else None)
        return self._opening(table)

    def _table_source(self, topic: str) -> Source:
        def open_read(start: StartLike, compacted: bool, follow: bool) -> Reader:
            return self.reader(topic, start, read_compacted=compacted, follow=follow)

        return Source(open_read, lambda: self.compaction_status(topic))
