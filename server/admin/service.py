"""The ``compactlog.v1.TopicAdmin`` servicer: translate, call, translate back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import grpc

from compactlog.compactor.progress import LocalRunControl
from compactlog.errors import InvalidArgument, Unimplemented
from compactlog.server.admin import partitioned_compaction
from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.admin.subscriptions import SubscriptionAdmin
from compactlog.server.admin.validation import validate_only
from compactlog.server.broker import Broker
from compactlog.server.log.dispatchers import Dispatchers
from compactlog.server.rpc.convert import kind_from_pb, topic_info
from compactlog.server.rpc.errors import rpc
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


def past_deadline(context: grpc.ServicerContext) -> Callable[[], bool]:
    """Whether the call's deadline has passed: how a long handler learns that its caller
    gave up. (grpc.aio's context of a synchronous handler takes ``add_callback`` but never
    calls it, so a caller that went away without a deadline is not seen: the work ends,
    and its answer goes nowhere.)"""

    def passed() -> bool:
        left = context.time_remaining()
        return left is not None and left <= 0

    return passed


class CallControl(LocalRunControl):
    """A run control that cancels itself once its call's deadline has passed: a preview
    or verification whose caller gave up stops reading in its worker, or stops waiting
    for one."""

    def __init__(self, context: grpc.ServicerContext) -> None:
        super().__init__()
        self.passed = past_deadline(context)

    @property
    def cancelled(self) -> bool:
        if self.passed():
            self.cancel()
        return super().cancelled

    def check(self) -> None:
        if self.cancelled:
            super().check()


class Compactions(Protocol):
    """What the admin API needs from the compaction side (both topic kinds)."""

    def compact(self, topic: str, wait: bool) -> pb.CompactionStatus: ...

    def status(self, topic: str) -> pb.CompactionStatus: ...

    def watch(self, topic: str, gone: Callable[[], bool]) -> Iterator[pb.CompactionProgress]:
        """Progress of the active run until it ends (``gone``: the caller left)."""
        ...

    def cancel(self, topic: str) -> pb.CompactionStatus: ...

    def preview(self, topic: str, control: LocalRunControl) -> pb.CompactionRun: ...

    def verify(self, topic: str, control: LocalRunControl) -> pb.VerifyCompactionResponse: ...


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
        self.partitioned = PartitionedNamespace(broker)

    def _partitions(self, name: str) -> list[tuple[int, str]] | None:
        """``(i, NAME-partition-i)`` of the partitions of ``name`` this store holds when
        it is a partitioned topic (``PartitionedNamespace.local``), else None."""
        if self.partitioned.get(name) is None:
            return None
        return self.partitioned.local(name)

    def _not_for_partitioned(self, name: str, what: str) -> None:
        if self.partitioned.get(name) is not None:
            raise InvalidArgument(
                f"topic {name!r} is partitioned: {what} applies to one partition "
                f"({name}-partition-i)",
                topic=name,
            )

    @rpc
    def CreateTopic(
        self, request: pb.CreateTopicRequest, context: grpc.ServicerContext
    ) -> pb.TopicInfo:
        kind = kind_from_pb(request.kind)
        if validate_only(context.invocation_metadata()):  # every check, nothing made
            return self._check_create(request)
        if request.partitions > 1:
            desc = self.partitioned.create(
                request.name, kind, dict(request.config), request.partitions
            )
        else:
            desc = self.partitioned.create_plain(request.name, kind, dict(request.config))
        return topic_info(desc)

    @rpc
    def AddPartitions(
        self, request: pb.AddPartitionsRequest, context: grpc.ServicerContext
    ) -> pb.TopicInfo:
        checked = validate_only(context.invocation_metadata())
        return topic_info(
            self.partitioned.add_partitions(request.name, request.partitions, checked)
        )

    def _check_create(self, request: pb.CreateTopicRequest) -> pb.TopicInfo:
        """What a CreateTopic marked validate-only answers (``admin.validation``): the
        topic as it would be made, after every check of the create."""
        kind, config = kind_from_pb(request.kind), dict(request.config)
        if request.partitions > 1:
            self.partitioned.check(request.name, kind, config, request.partitions)
        else:
            self.partitioned.check_plain(request.name, kind, config)
        return pb.TopicInfo(
            name=request.name, kind=request.kind, config=config, partitions=request.partitions
        )

    def _describe(self, name: str) -> pb.TopicInfo:
        """GetTopic's answer; a partition of a delete refused half-way is not shown
        (``NOT_FOUND``, "is being deleted"), as its Log calls are refused."""
        if self.partitioned.get(name) is not None:
            return topic_info(self.partitioned.describe(name))
        self.broker.refuse_if_deleting(name)
        return topic_info(self.broker.describe(name))

    @rpc
    def GetTopic(self, request: pb.GetTopicRequest, context: grpc.ServicerContext) -> pb.TopicInfo:
        return self._describe(request.name)

    @rpc
    def ListTopics(
        self, request: pb.ListTopicsRequest, context: grpc.ServicerContext
    ) -> pb.ListTopicsResponse:
        resp = pb.ListTopicsResponse()
        names = sorted({*self.broker.topic_names(), *self.broker.partitioned.names()})
        for name in (n for n in names if n.startswith(request.prefix)):
            if self.broker.partitioned.deleting(name) is not None:
                continue  # what a delete refused half-way left: gone for a client
            try:
                resp.topics.append(self._describe(name))
            except Exception:  # deleted between listing and describing
                continue
        return resp

    @rpc
    def UpdateTopicConfig(
        self, request: pb.UpdateTopicConfigRequest, context: grpc.ServicerContext
    ) -> pb.TopicInfo:
        set_, remove = dict(request.set), list(request.remove)
        if self.partitioned.get(request.name) is not None:
            return topic_info(self.partitioned.update_config(request.name, set_, remove))
        return topic_info(self.broker.update_config(request.name, set_, remove))

    @rpc
    def DeleteTopic(
        self, request: pb.DeleteTopicRequest, context: grpc.ServicerContext
    ) -> pb.DeleteTopicResponse:
        if self.partitioned.deletes(request.name):
            self.partitioned.delete(request.name)
        else:
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
        names = self._partitions(request.topic)
        if names is not None:
            compactions = self._compactions()
            return partitioned_compaction.compact(compactions, request.topic, names, request.wait)
        self.broker.kind(request.topic)
        return self._compactions().compact(request.topic, request.wait)

    @rpc
    def GetCompactionStatus(
        self, request: pb.GetCompactionStatusRequest, context: grpc.ServicerContext
    ) -> pb.CompactionStatus:
        names = self._partitions(request.topic)
        if names is not None:
            return partitioned_compaction.status(self._compactions(), names)
        self.broker.kind(request.topic)
        return self._compactions().status(request.topic)

    @rpc
    def WatchCompaction(
        self, request: pb.WatchCompactionRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.CompactionProgress]:
        self._not_for_partitioned(request.topic, "WatchCompaction")
        self.broker.kind(request.topic)
        # a caller that went away ends the stream at its next update, one past its deadline
        # at once
        yield from self._compactions().watch(request.topic, past_deadline(context))

    @rpc
    def CancelCompaction(
        self, request: pb.CancelCompactionRequest, context: grpc.ServicerContext
    ) -> pb.CompactionStatus:
        names = self._partitions(request.topic)
        if names is not None:
            return partitioned_compaction.cancel(self._compactions(), request.topic, names)
        self.broker.kind(request.topic)
        return self._compactions().cancel(request.topic)

    @rpc
    def PreviewCompaction(
        self, request: pb.PreviewCompactionRequest, context: grpc.ServicerContext
    ) -> pb.CompactionRun:
        self._not_for_partitioned(request.topic, "PreviewCompaction")
        self.broker.kind(request.topic)
        return self._compactions().preview(request.topic, CallControl(context))

    @rpc
    def VerifyCompaction(
        self, request: pb.VerifyCompactionRequest, context: grpc.ServicerContext
    ) -> pb.VerifyCompactionResponse:
        self._not_for_partitioned(request.topic, "VerifyCompaction")
        self.broker.kind(request.topic)
        return self._compactions().verify(request.topic, CallControl(context))

    @rpc
    def EnforceRetention(
        self, request: pb.EnforceRetentionRequest, context: grpc.ServicerContext
    ) -> pb.TopicInfo:
        names = self._partitions(request.topic)
        if names is not None:
            for _i, name in names:
                self.broker.enforce_retention(name)
            return self._describe(request.topic)
        return topic_info(self.broker.enforce_retention(request.topic))

    @rpc
    def DeleteRecords(
        self, request: pb.DeleteRecordsRequest, context: grpc.ServicerContext
    ) -> pb.TopicInfo:
        self._not_for_partitioned(request.topic, "DeleteRecords")
        return topic_info(self.broker.delete_records(request.topic, request.before_offset))

    # ---- subscriptions (server.admin.subscriptions) --------------------------------------

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

    @rpc
    def GetPartitionMap(
        self, request: pb.GetPartitionMapRequest, context: grpc.ServicerContext
    ) -> pb.GetPartitionMapResponse:
        """Every topic this process holds is served at the address asked (``""``); a
        sharded server's front answers with the owners' addresses (``server/front/router.py``)."""
        names = self._partitions(request.topic)
        if names is None:
            self.broker.kind(request.topic)  # TOPIC_NOT_FOUND
            return partition_map([(-1, request.topic)])
        return partition_map(names)


def partition_map(entries: list[tuple[int, str]], address: str = "") -> pb.GetPartitionMapResponse:
    """One ``PartitionAddress`` per (partition, topic): a partitioned topic's partitions in
    order, or one entry, ``-1``, for a topic that is not partitioned; all at ``address``
    (``""``: the address the map was asked at)."""
    return pb.GetPartitionMapResponse(
        partitions=[pb.PartitionAddress(partition=i, topic=t, address=address) for i, t in entries]
    )
