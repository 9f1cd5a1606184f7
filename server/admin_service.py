"""The ``compactlog.v1.TopicAdmin`` servicer: translate, call, translate back."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Protocol

import grpc

from compactlog.errors import Unimplemented
from compactlog.server.broker import Broker
from compactlog.server.convert import kind_from_pb, topic_info
from compactlog.server.errors import rpc
from compactlog.server.subscription_admin import SubscriptionAdmin
from compactlog.server.subscriptions import Dispatchers
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


class Compactions(Protocol):
    """What the admin API needs from the compaction side (both topic kinds)."""

    def compact(self, topic: str, wait: bool) -> pb.CompactionStatus: ...

    def status(self, topic: str) -> pb.CompactionStatus: ...

    def watch(self, topic: str, gone: Callable[[], bool]) -> Iterator[pb.CompactionProgress]:
        """Progress of the active run until it ends (``gone``: the caller left)."""
        ...

    def cancel(self, topic: str) -> pb.CompactionStatus: ...

    def preview(self, topic: str) -> pb.CompactionRun: ...

    def verify(self, topic: str) -> pb.VerifyCompactionResponse: ...


class TopicAdminService(pb_grpc.TopicAdminServicer):
    def __init__(
        self,
        broker: Broker,
        compactions: Compactions | None,
        subscriptions: SubscriptionAdmin | None = None,
    ) -> None:
        self.broker = broker
        self.compactions = compactions
        self.subscriptions = subscriptions or SubscriptionAdmin(
            broker, Dispatchers(), lambda _topic: None
        )

    @rpc
    def CreateTopic(
        self, request: pb.CreateTopicRequest, context: grpc.ServicerContext
    ) -> pb.TopicInfo:
        desc = self.broker.create_topic(
            request.name, kind_from_pb(request.kind), dict(request.config)
        )
        return topic_info(desc)

    @rpc
    def GetTopic(self, request: pb.GetTopicRequest, context: grpc.ServicerContext) -> pb.TopicInfo:
        return topic_info(self.broker.describe(request.name))

    @rpc
    def ListTopics(
        self, request: pb.ListTopicsRequest, context: grpc.ServicerContext
    ) -> pb.ListTopicsResponse:
        resp = pb.ListTopicsResponse()
        for name in self.broker.topic_names():
            try:
                resp.topics.append(topic_info(self.broker.describe(name)))
            except Exception:  # deleted between listing and describing
                continue
        return resp

    @rpc
    def UpdateTopicConfig(
        self, request: pb.UpdateTopicConfigRequest, context: grpc.ServicerContext
    ) -> pb.TopicInfo:
        desc = self.broker.update_config(request.name, dict(request.set), list(request.remove))
        return topic_info(desc)

    @rpc
    def DeleteTopic(
        self, request: pb.DeleteTopicRequest, context: grpc.ServicerContext
    ) -> pb.DeleteTopicResponse:
        self.broker.delete_topic(request.name)
        return pb.DeleteTopicResponse()

    def _compactions(self) -> Compactions:
        if self.compactions is None:
            raise Unimplemented("compaction is not available in this server")
        return self.compactions

    @rpc
    def Compact(
        self, request: pb.CompactRequest, context: grpc.ServicerContext
    ) -> pb.CompactionStatus:
        self.broker.kind(request.topic)
        return self._compactions().compact(request.topic, request.wait)

    @rpc
    def GetCompactionStatus(
        self, request: pb.GetCompactionStatusRequest, context: grpc.ServicerContext
    ) -> pb.CompactionStatus:
        self.broker.kind(request.topic)
        return self._compactions().status(request.topic)

    @rpc
    def WatchCompaction(
        self, request: pb.WatchCompactionRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.CompactionProgress]:
        self.broker.kind(request.topic)
        gone = threading.Event()  # the caller cancelled or went away
        context.add_callback(gone.set)
        yield from self._compactions().watch(request.topic, gone.is_set)

    @rpc
    def CancelCompaction(
        self, request: pb.CancelCompactionRequest, context: grpc.ServicerContext
    ) -> pb.CompactionStatus:
        self.broker.kind(request.topic)
        return self._compactions().cancel(request.topic)

    @rpc
    def PreviewCompaction(
        self, request: pb.PreviewCompactionRequest, context: grpc.ServicerContext
    ) -> pb.CompactionRun:
        self.broker.kind(request.topic)
        return self._compactions().preview(request.topic)

    @rpc
    def VerifyCompaction(
        self, request: pb.VerifyCompactionRequest, context: grpc.ServicerContext
    ) -> pb.VerifyCompactionResponse:
        self.broker.kind(request.topic)
        return self._compactions().verify(request.topic)

    @rpc
    def EnforceRetention(
        self, request: pb.EnforceRetentionRequest, context: grpc.ServicerContext
    ) -> pb.TopicInfo:
        return topic_info(self.broker.enforce_retention(request.topic))

    @rpc
    def DeleteRecords(
        self, request: pb.DeleteRecordsRequest, context: grpc.ServicerContext
    ) -> pb.TopicInfo:
        return topic_info(self.broker.delete_records(request.topic, request.before_offset))

    # ---- subscriptions (server.subscription_admin) --------------------------------------

    @rpc
    def ListSubscriptions(
        self, request: pb.ListSubscriptionsRequest, context: grpc.ServicerContext
    ) -> pb.ListSubscriptionsResponse:
        return self.subscriptions.list(request.topic)

    @rpc
    def DeleteSubscription(
        self, request: pb.DeleteSubscriptionRequest, context: grpc.ServicerContext
    ) -> pb.DeleteSubscriptionResponse:
        self.subscriptions.delete(request.topic, request.subscription)
        return pb.DeleteSubscriptionResponse()

    @rpc
    def ResetCursor(
        self, request: pb.ResetCursorRequest, context: grpc.ServicerContext
    ) -> pb.SubscriptionInfo:
        return self.subscriptions.reset(request)
