"""The ``compactlog.v1.Log`` servicer: translate, call, translate back."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

import grpc

from compactlog.server.broker import Broker
from compactlog.server.convert import (
    id_from_pb,
    id_to_pb,
    parse_publish,
    publish_reply,
    records_from_pb,
)
from compactlog.server.errors import rpc
from compactlog.server.metrics import Metrics
from compactlog.server.reading import Reading
from compactlog.storage.ledger_append import IdRun
from compactlog.storage.names import check_subscription_name
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

# Requests of one PublishStream written ahead while earlier ones wait for their fsync.
PUBLISH_PIPELINE_DEPTH = 8


class LogService(pb_grpc.LogServicer):
    """Publish takes the request's raw bytes and Read/Consume answer raw bytes (see
    ``log_handler``): records go from the wire into stored batches and back out without
    a per-record Python object."""

    def __init__(self, broker: Broker, reading: Reading, metrics: Metrics) -> None:
        self.broker = broker
        self.reading = reading
        self.metrics = metrics

    def _publish_start(self, raw: bytes) -> Callable[[], bytes]:
        """Append now; the returned call waits for durability and builds the reply bytes.

        The request is parsed by protobuf once (validation: a malformed request, or a
        property that is not UTF-8, is refused before anything is stored); the records
        are then encoded by the batch codec from the raw bytes.
        """
        started = time.perf_counter()
        request = parse_publish(raw)
        name = request.topic
        if self.broker.ledgers.has_topic(name):
            kind = "LEDGER"
            pending = self.broker.ledgers.append_request_start(name, raw)
            synced = self.broker.ledgers.fsync

            def finish() -> tuple[list[IdRun], bool]:
                return pending.wait_runs(), synced
        else:
            kind = self.broker.kind(name).name
            ids, synced = self.broker.publish(name, records_from_pb(request.records))
            runs = [(i.ledger_id, i.entry_id, 1) for i in ids]

            def finish() -> tuple[list[IdRun], bool]:
                return runs, synced

        def reply() -> bytes:
            runs, synced = finish()
            count = sum(run[2] for run in runs)
            self.metrics.publish_requests.labels(kind).inc()
            self.metrics.publish_records.labels(kind).inc(count)
            self.metrics.publish_bytes.labels(kind).inc(len(raw))
            self.metrics.publish_latency.labels(kind).observe(time.perf_counter() - started)
            return publish_reply(runs, synced)

        return reply

    @rpc
    def Publish(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return self._publish_start(request)()

    @rpc
    def PublishStream(
        self, request_iterator: Iterator[bytes], context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        """Answers in request order; a failed request ends the stream with its status,
        after the replies of every request before it."""
        pending: queue.Queue[Callable[[], bytes] | BaseException | None] = queue.Queue(
            maxsize=PUBLISH_PIPELINE_DEPTH
        )

        def intake() -> None:
            try:
                for request in request_iterator:
                    pending.put(self._publish_start(request))
            except BaseException as exc:  # handed to the replying side, in order
                pending.put(exc)
            else:
                pending.put(None)

        threading.Thread(target=intake, name="publish-intake", daemon=True).start()
        while True:
            item = pending.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                if isinstance(item, grpc.RpcError) or not context.is_active():
                    return  # the client went away mid-stream
                raise item
            yield item()

    @rpc
    def Read(self, request: pb.ReadRequest, context: grpc.ServicerContext) -> Iterator[bytes]:
        kind = self.broker.kind(request.topic).name
        compacted = str(request.read_compacted).lower()
        self.metrics.read_requests.labels(kind, compacted).inc()
        counter = self.metrics.read_messages.labels(kind, compacted)
        latency = self.metrics.read_batch_latency.labels(kind)
        responses = self.reading.read(request, context.is_active)
        while True:
            started = time.perf_counter()
            resp = next(responses, None)
            if resp is None:
                return
            if not request.follow:  # a follower's wait for new data is not latency
                latency.observe(time.perf_counter() - started)
            data, count = resp
            counter.inc(count)
            yield data

    @rpc
    def Consume(self, request: pb.ConsumeRequest, context: grpc.ServicerContext) -> bytes:
        check_subscription_name(request.subscription)
        data, count = self.reading.consume(request, context.is_active)
        self.metrics.consume_messages.inc(count)
        return data

    @rpc
    def Acknowledge(
        self, request: pb.AcknowledgeRequest, context: grpc.ServicerContext
    ) -> pb.AcknowledgeResponse:
        check_subscription_name(request.subscription)
        msg_id = id_from_pb(request.id)
        if self.broker.kind(request.topic) == TopicKind.SEGMENTED:
            self.reading.segment_subscriptions.acknowledge(
                request.topic, request.subscription, msg_id, request.cumulative
            )
        else:
            self.broker.ledgers.acknowledge(
                request.topic, request.subscription, msg_id, request.cumulative
            )
        return pb.AcknowledgeResponse()

    @rpc
    def GetLastMessageId(
        self, request: pb.GetLastMessageIdRequest, context: grpc.ServicerContext
    ) -> pb.GetLastMessageIdResponse:
        last = self.reading.last_message_id(request.topic, request.read_compacted)
        resp = pb.GetLastMessageIdResponse()
        if last is not None:
            id_to_pb(last, resp.id)
        return resp


# Methods whose handler takes the request's bytes (Publish*) or returns response bytes
# (Read, Consume): the generated (de)serializer is replaced by a pass-through.
_RAW_REQUEST = {"Publish", "PublishStream"}
_RAW_RESPONSE = {"Publish", "PublishStream", "Read", "Consume"}


def _same(data: bytes) -> bytes:
    return data


def log_handler(service: LogService) -> grpc.GenericRpcHandler:
    """The Log service's handlers, as ``add_LogServicer_to_server`` would register them
    but with raw bytes where the data plane's hot path runs."""
    methods = pb.DESCRIPTOR.services_by_name["Log"].methods
    handlers = {}
    for method in methods:
        name = method.name
        request_cls = getattr(pb, method.input_type.name)
        response_cls = getattr(pb, method.output_type.name)
        make = {
            (False, False): grpc.unary_unary_rpc_method_handler,
            (False, True): grpc.unary_stream_rpc_method_handler,
            (True, True): grpc.stream_stream_rpc_method_handler,
            (True, False): grpc.stream_unary_rpc_method_handler,
        }[(method.client_streaming, method.server_streaming)]
        handlers[name] = make(
            getattr(service, name),
            request_deserializer=_same if name in _RAW_REQUEST else request_cls.FromString,
            response_serializer=_same if name in _RAW_RESPONSE else response_cls.SerializeToString,
        )
    return grpc.method_handlers_generic_handler("compactlog.v1.Log", handlers)
