"""The ``compactlog.v1.Log`` servicer: translate, call, translate back."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc

from compactlog.errors import WrongTopicKind
from compactlog.server.broker import Broker
from compactlog.server.convert import id_from_pb, id_to_pb, records_from_pb
from compactlog.server.errors import rpc
from compactlog.server.metrics import Metrics
from compactlog.server.reading import Reading
from compactlog.storage.names import check_subscription_name
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


class LogService(pb_grpc.LogServicer):
    def __init__(self, broker: Broker, reading: Reading, metrics: Metrics) -> None:
        self.broker = broker
        self.reading = reading
        self.metrics = metrics

    def _publish(self, request: pb.PublishRequest) -> pb.PublishResponse:
        started = time.perf_counter()
        kind = self.broker.kind(request.topic).name
        records = records_from_pb(request.records)
        ids, synced = self.broker.publish(request.topic, records)
        resp = pb.PublishResponse(synced=synced)
        add = resp.ids.add
        for msg_id in ids:
            m = add()
            m.ledger_id = msg_id.ledger_id
            m.entry_id = msg_id.entry_id
        self.metrics.publish_requests.labels(kind).inc()
        self.metrics.publish_records.labels(kind).inc(len(ids))
        self.metrics.publish_latency.labels(kind).observe(time.perf_counter() - started)
        return resp

    @rpc
    def Publish(
        self, request: pb.PublishRequest, context: grpc.ServicerContext
    ) -> pb.PublishResponse:
        return self._publish(request)

    def PublishStream(
        self, request_iterator: Iterator[pb.PublishRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.PublishResponse]:
        @rpc
        def each(
            _self: object, request: pb.PublishRequest, ctx: grpc.ServicerContext
        ) -> pb.PublishResponse:
            return self._publish(request)

        for request in request_iterator:
            yield each(self, request, context)

    @rpc
    def Read(
        self, request: pb.ReadRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.ReadResponse]:
        kind = self.broker.kind(request.topic).name
        compacted = str(request.read_compacted).lower()
        self.metrics.read_requests.labels(kind, compacted).inc()
        counter = self.metrics.read_messages.labels(kind, compacted)
        for resp in self.reading.read(request, context.is_active):
            counter.inc(len(resp.messages))
            yield resp

    @rpc
    def Consume(
        self, request: pb.ConsumeRequest, context: grpc.ServicerContext
    ) -> pb.ConsumeResponse:
        check_subscription_name(request.subscription)
        resp = self.reading.consume(request, context.is_active)
        self.metrics.consume_messages.inc(len(resp.messages))
        return resp

    @rpc
    def Acknowledge(
        self, request: pb.AcknowledgeRequest, context: grpc.ServicerContext
    ) -> pb.AcknowledgeResponse:
        check_subscription_name(request.subscription)
        if self.broker.kind(request.topic) != TopicKind.LEDGER:
            raise WrongTopicKind("subscriptions are served for LEDGER topics")
        self.broker.ledgers.acknowledge(
            request.topic, request.subscription, id_from_pb(request.id), request.cumulative
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
