"""The ``compactlog.v1.Log`` servicer on ``grpc.aio``: thin async adapters over the
``TopicLog`` of the topic a request names.

Publish takes the request's raw bytes and Read/Consume answer raw bytes (see
``log_handler``): records go from the wire into stored batches and back out without a
per-record Python object. A publish goes to its topic's writer (``log.writer``: every
request waiting written as one group, one fsync and one wake-up of the loop for it), which
runs on an executor of its own, so that a publish never queues behind the read steps of
many readers and consumers woken at once (CONTRACT section 12). Other storage work runs in
an executor, one step at a time; waits (for new data, for a consumer's ``wait_ms``) hold
no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import Executor
from typing import Any, TypeVar

import grpc

from compactlog.errors import NotDelivered, ShuttingDown, TopicNotFound
from compactlog.server.broker import Broker
from compactlog.server.log.ack_list import acknowledge_list
from compactlog.server.log.consume_stream import consume_stream, first_flow
from compactlog.server.log.consuming import Consuming
from compactlog.server.log.dispatchers import Dispatchers, subscription_cursor
from compactlog.server.log.partitioned import (
    MergedLog,
    MergedPast,
    PartitionedCalls,
    merged_key_history,
)
from compactlog.server.log.partitioned_reading import MergedReadSession
from compactlog.server.log.publishing import Publishing
from compactlog.server.log.reading import ReadSession, as_of_point
from compactlog.server.log.thread_futures import future_of
from compactlog.server.log.waiting import TopicSignals
from compactlog.server.log.writer import Chain
from compactlog.server.metrics import Metrics
from compactlog.server.rpc.convert import (
    id_from_pb,
    id_to_pb,
    ids_from_pb,
)
from compactlog.server.rpc.errors import rpc_async
from compactlog.server.rpc.handlers import Admit, service_handler
from compactlog.server.rpc.wire_peek import topic_of
from compactlog.storage import file_limits
from compactlog.storage.key_history import key_history
from compactlog.storage.names import check_client_subscription
from compactlog.storage.topic_log import Pending, ReadableLog, TopicLog
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

T = TypeVar("T")

# Requests of one PublishStream written ahead while earlier ones wait for their fsync.
PUBLISH_PIPELINE_DEPTH = 8


Context = grpc.aio.ServicerContext[Any, Any]


class LogService:
    """Handlers of every Log method, registered by ``log_handler`` (not the generated
    servicer base: Publish takes and Read/Consume return raw bytes)."""

    def __init__(
        self,
        broker: Broker,
        metrics: Metrics,
        executor: Executor,
        signals: TopicSignals,
        batch_size: int,
        appends: Executor | None = None,
        dispatchers: Dispatchers | None = None,
    ) -> None:
        self.broker = broker
        self.metrics = metrics
        self.executor = executor
        self.appends = appends or executor
        self.signals = signals
        self.batch_size = batch_size
        self.dispatchers = dispatchers or Dispatchers()
        self.consuming = Consuming(self._run, signals, metrics, batch_size, self.dispatchers)
        self.publishing = Publishing(broker, metrics, self.appends)
        self.partitioned = PartitionedCalls(self)

    @property
    def spanning(self) -> bool:
        """A slot of a sharded server: honour spanning-part markers."""
        return self.publishing.spanning

    @spanning.setter
    def spanning(self, on: bool) -> None:
        self.publishing.spanning = on

    # Finding a topic's TopicLog is a dictionary lookup and stays on the event loop; every
    # step that may touch RocksDB or a file runs in the executor.
    def _run(self, fn: Callable[..., T], *args: Any) -> Awaitable[T]:
        return asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    # ---- publish ----------------------------------------------------------------------

    def _publish(self, raw: bytes, chain: Chain | None = None) -> asyncio.Future[bytes]:
        """Hand ``raw`` to the writer of the topic it names (read from its bytes; the
        writer's thread parses it); the future gives the reply once it is durable."""
        return self.publishing.writers.submit(topic_of(raw) or "", raw, chain)

    async def _durable(self, appended: Pending) -> None:
        await future_of(appended.on_durable)

    @rpc_async
    async def Publish(self, request: bytes, context: Context) -> bytes:
        return await self._publish(request)

    @rpc_async
    async def PublishStream(
        self, request_iterator: AsyncIterator[bytes], context: Context
    ) -> AsyncIterator[bytes]:
        """Answers in request order. Up to ``PUBLISH_PIPELINE_DEPTH`` requests are handed
        to their writers before the first is answered, so the writer finds several
        waiting and one fsync covers them. A failed request ends the stream with its
        status, after the replies of every request before it."""
        file_limits.BUDGET.check_stream("a PublishStream")
        pending: asyncio.Queue[asyncio.Future[bytes] | BaseException | None]
        pending = asyncio.Queue(maxsize=PUBLISH_PIPELINE_DEPTH)

        chain = Chain()  # a failed request stops the writing of the stream's later ones

        async def intake() -> None:
            try:
                async for request in request_iterator:
                    await pending.put(self._publish(request, chain))
            except Exception as exc:  # handed to the replying side, in order
                await pending.put(exc)
            else:
                await pending.put(None)

        task = asyncio.ensure_future(intake())
        try:
            while True:
                item = await pending.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield await item
        finally:
            task.cancel()
            while not pending.empty():  # nobody will take these answers now
                left = pending.get_nowait()
                if isinstance(left, asyncio.Future):
                    left.cancel()

    # ---- read -------------------------------------------------------------------------

    @rpc_async
    async def Read(self, request: pb.ReadRequest, context: Context) -> AsyncIterator[bytes]:
        if request.follow:  # a stream that may stay open for hours: only with room to spare
            file_limits.BUDGET.check_stream("a follow Read")
        merged: MergedLog | MergedPast | None = self.partitioned.merged(request.topic)
        single: ReadableLog | None = None
        past = as_of_point(request)
        if past is not None and isinstance(merged, MergedLog):  # every partition's past
            merged = await self._run(self.partitioned.past, merged, *past)
        elif past is not None:  # a view of one topic's past
            single = await self._run(self.broker.as_of_view, request.topic, *past)
        elif merged is None:
            single = self.broker.log(request.topic)
        log: ReadableLog | MergedLog | MergedPast = single if single is not None else merged  # type: ignore[assignment]
        compacted = str(request.read_compacted).lower()
        self.metrics.read_requests.labels(log.kind.name, compacted).inc()
        counter = self.metrics.read_messages.labels(log.kind.name, compacted)
        latency = self.metrics.read_batch_latency.labels(log.kind.name)
        session: ReadSession | MergedReadSession
        if single is not None:
            session = await self._run(ReadSession, single, request, self.batch_size)
        else:
            assert merged is not None
            session = await self._run(merged.read_session, request, self.batch_size)
        # The stream has started (topic found, start set): clients bound their wait for
        # this, not a follow read's wait for new messages (client.deadlines).
        await context.send_initial_metadata(())
        while not session.done:
            change = self.signals.next_change(log.name)
            started = time.perf_counter()
            responses = await self._run(session.steps)
            if responses:
                latency.observe((time.perf_counter() - started) / len(responses))
                for data, count in responses:
                    counter.inc(count)
                    yield data
                continue
            if not request.follow:
                return
            if self.signals.stopping.is_set():  # a follower learns to reconnect elsewhere
                raise ShuttingDown("the server is shutting down", topic=log.name)
            if log.gone():
                raise TopicNotFound(
                    f"topic {log.name!r} was deleted while being read", topic=log.name
                )
            await self.signals.wait(change)

    @rpc_async
    async def Consume(self, request: pb.ConsumeRequest, context: Context) -> bytes:
        """Up to ``max_messages`` messages for this consumer, waiting up to ``wait_ms``
        (``server.log.consuming``: subscription types, redelivery, what moves the cursor)."""
        check_client_subscription(request.subscription, request.topic)
        merged = self.partitioned.merged(request.topic)
        logs = [self.broker.log(request.topic)] if merged is None else merged.logs
        return await self.consuming.consume(request.topic, logs, request)

    @rpc_async
    async def ConsumeStream(
        self, request_iterator: AsyncIterator[pb.ConsumeFlow], context: Context
    ) -> AsyncIterator[bytes]:
        """Consume pushed within the consumer's flow permits (``log.consume_stream``);
        its end releases the consumer as CloseConsumer does."""
        first = await first_flow(request_iterator)
        start = first.start
        check_client_subscription(start.subscription, start.topic)
        merged = self.partitioned.merged(start.topic)
        logs = [self.broker.log(start.topic)] if merged is None else merged.logs
        await self.consuming.admit(logs, start)
        # The subscription exists and this consumer is admitted: the client may go on.
        await context.send_initial_metadata(())
        closing = pb.CloseConsumerRequest(
            topic=start.topic, subscription=start.subscription, consumer_name=start.consumer_name
        )

        async def consume(
            step: pb.ConsumeRequest, stop: asyncio.Future[None], whole_to: int
        ) -> tuple[bytes, int]:
            found = await self.consuming.consume_counted(start.topic, logs, step, stop, whole_to)
            if not found[1] and self.signals.stopping.is_set():  # reconnect elsewhere
                raise ShuttingDown("the server is shutting down", topic=start.topic)
            if not found[1] and any(log.gone() for log in logs):
                raise TopicNotFound(
                    f"topic {start.topic!r} was deleted while being consumed", topic=start.topic
                )
            return found

        async def leave(stay: bool) -> None:
            if stay:  # another stream of it follows at once
                await self.consuming.keep_alive(logs, start)
            else:
                await self._close_consumer(logs, closing)

        responses = consume_stream(
            first, request_iterator, consume, leave, self.dispatchers.liveness_s
        )
        async with contextlib.aclosing(responses):  # its end leaves however this one ends
            async for data in responses:
                yield data

    @rpc_async
    async def CloseConsumer(
        self, request: pb.CloseConsumerRequest, context: Context
    ) -> pb.CloseConsumerResponse:
        """The consumer leaves the subscription now (``Consuming.close``); on a
        partitioned ``NAME``, the subscription of every partition held here."""
        check_client_subscription(request.subscription, request.topic)
        merged = self.partitioned.merged(request.topic)
        logs = [self.broker.log(request.topic)] if merged is None else merged.logs
        await self._close_consumer(logs, request)
        return pb.CloseConsumerResponse()

    async def _close_consumer(
        self, logs: Sequence[TopicLog], request: pb.CloseConsumerRequest
    ) -> None:
        for log in logs:
            await self.consuming.close(log, request)
        self.signals.notify(request.topic)  # a partitioned NAME's consumers wait on NAME

    # ---- cursors and ids ----------------------------------------------------------------

    @rpc_async
    async def Acknowledge(
        self, request: pb.AcknowledgeRequest, context: Context
    ) -> pb.AcknowledgeResponse:
        check_client_subscription(request.subscription, request.topic)
        self.metrics.acknowledge_requests.labels(str(request.cumulative).lower()).inc()
        merged = self.partitioned.merged(request.topic)
        log = self.broker.log(request.topic) if merged is None else merged.of_id(request.id)
        msg_id = id_from_pb(request.id)
        acked = await self._run(log.acknowledge, request.subscription, msg_id, request.cumulative)
        dispatcher = self.dispatchers.get(log.name, request.subscription)
        if dispatcher is not None:  # not pending, not due again
            dispatcher.acknowledged(msg_id, request.cumulative)
        await self._durable(acked)  # a group commit, shared with publishes and other acks
        return pb.AcknowledgeResponse()

    @rpc_async
    async def AcknowledgeList(
        self, request: pb.AcknowledgeListRequest, context: Context
    ) -> pb.AcknowledgeListResponse:
        """Individual acks of many ids, all or none, one cursor write a log (``ack_list``)."""
        check_client_subscription(request.subscription, request.topic)
        self.metrics.acknowledge_list_requests.inc()
        self.metrics.acknowledge_list_ids.inc(len(request.ids))
        groups = self._by_log(request.topic, request.ids)
        await acknowledge_list(
            self._run, self._durable, self.dispatchers, groups, request.subscription
        )
        return pb.AcknowledgeListResponse()

    @rpc_async
    async def NegativeAcknowledge(
        self, request: pb.NegativeAcknowledgeRequest, context: Context
    ) -> pb.NegativeAcknowledgeResponse:
        """The messages go out again after the delay (memory only, as in Pulsar). Ids
        acknowledged already are left alone; an id never delivered is NOT_DELIVERED."""
        check_client_subscription(request.subscription, request.topic)
        groups = self._by_log(request.topic, request.ids)
        cursors = [
            await self._run(subscription_cursor, log, request.subscription) for log, _ in groups
        ]
        for (log, ids), cursor in zip(groups, cursors, strict=True):  # all checked first
            try:
                for msg_id in ids:
                    cursor.check_delivered(msg_id, lambda _id: True)
            except NotDelivered as exc:
                exc.metadata["topic"] = log.name
                raise
        for (log, ids), cursor in zip(groups, cursors, strict=True):
            dispatcher = self.dispatchers.of(log.name, cursor)
            delay = request.redelivery_delay_ms
            dispatcher.negative([i for i in ids if not cursor.is_acked(i)], delay)
            self.signals.notify(log.name)  # waiting consumers take the new due time
        self.signals.notify(request.topic)  # those of a partitioned NAME wait on NAME
        return pb.NegativeAcknowledgeResponse()

    def _by_log(
        self, topic: str, ids: Sequence[pb.MessageId]
    ) -> list[tuple[TopicLog, list[MessageId]]]:
        """The ids by the log they belong to: the topic's, or on a partitioned ``NAME``
        the partition each names (one held elsewhere: ``NOT_OWNER``)."""
        merged = self.partitioned.merged(topic)
        if merged is None:
            return [(self.broker.log(topic), ids_from_pb(ids))]
        groups: dict[str, tuple[TopicLog, list[MessageId]]] = {}
        for pb_id in ids:
            log = merged.of_id(pb_id)
            groups.setdefault(log.name, (log, []))[1].append(id_from_pb(pb_id))
        return list(groups.values())

    @rpc_async
    async def GetLastMessageId(
        self, request: pb.GetLastMessageIdRequest, context: Context
    ) -> pb.GetLastMessageIdResponse:
        merged = self.partitioned.merged(request.topic)
        if merged is not None:
            return await self._run(merged.last_ids, request.read_compacted)
        log = self.broker.log(request.topic)
        last = await self._run(log.last_id, request.read_compacted)
        resp = pb.GetLastMessageIdResponse()
        if last is not None:
            id_to_pb(last, resp.id)
            resp.id.partition = log.partition
        return resp

    @rpc_async
    async def GetKeyHistory(self, request: pb.GetKeyHistoryRequest, context: Context) -> bytes:
        """Stored message records spliced into the response, as Read does (a partitioned
        topic's: every partition's, merged)."""
        merged = self.partitioned.merged(request.topic)
        if merged is not None:
            found = await self._run(
                merged_key_history, merged.logs, request.key, request.max_messages
            )
        else:
            log = self.broker.log(request.topic)
            found = await self._run(key_history, log, request.key, request.max_messages)
        return found.to_bytes() + (b"\x10\x01" if found.truncated else b"")


# Methods whose handler takes the request's bytes (Publish*) or returns response bytes
# (Read, Consume): the generated (de)serializer is replaced by a pass-through.
_RAW_REQUEST = {"Publish", "PublishStream"}
_RAW_RESPONSE = {"Publish", "PublishStream", "Read", "Consume", "ConsumeStream", "GetKeyHistory"}


def log_handler(service: LogService, admit: Admit | None = None) -> grpc.GenericRpcHandler:
    """The Log service's handlers, as ``add_LogServicer_to_server`` would register them
    but with raw bytes where the data plane's hot path runs, and checked deserializers."""
    stopping = service.signals.stopping.is_set
    return service_handler("Log", service, stopping, _RAW_REQUEST, _RAW_RESPONSE, admit)
