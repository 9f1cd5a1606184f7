"""The front's subscription calls on a spread partitioned ``NAME`` (partition placement).

Each slot holding partitions of ``NAME`` answers ListSubscriptions, DeleteSubscription
and ResetCursor for its own partitions (``admin.subscriptions``); the front asks them
through ``SpreadAdmin`` and answers whole, folding lists with ``merge_subscriptions``.
Which slots each call reaches, and when it is ``NOT_FOUND``, is in docs/architecture.md
("The front room, module by module").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from compactlog.partitioner import partition_name
from compactlog.server.admin.subscriptions import merge_subscriptions
from compactlog.server.front.relay import Ctx
from compactlog.server.front.relay import relay as _relay
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.v1 import compactlog_pb2 as pb

if TYPE_CHECKING:
    from compactlog.server.front.spread.admin import SpreadAdmin

_ADMIN = "/compactlog.v1.TopicAdmin/"
LIST = _ADMIN + "ListSubscriptions"
DELETE = _ADMIN + "DeleteSubscription"
RESET = _ADMIN + "ResetCursor"


class SpreadSubscriptions:
    """The answers ``SpreadAdmin`` gives for the subscription calls on a spread ``NAME``."""

    def __init__(self, admin: SpreadAdmin) -> None:
        self.admin = admin

    async def list_subscriptions(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        assert held is not None
        answers = await self.admin.found(self.admin.slots(held), LIST, request, context)
        lists = [pb.ListSubscriptionsResponse.FromString(b).subscriptions for b in answers.values()]
        merged = pb.ListSubscriptionsResponse(subscriptions=merge_subscriptions(lists))
        return merged.SerializeToString()

    async def delete_subscription(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        assert held is not None
        answers = await self.admin.found(self.admin.slots(held), DELETE, request, context)
        return next(iter(answers.values()))

    async def reset_cursor(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        assert held is not None
        slots = self.admin.slots(held)
        reset = pb.ResetCursorRequest.FromString(request)
        if reset.WhichOneof("target") != "message_id":
            answers = await self.admin.found(slots, RESET, request, context)
            infos = [[pb.SubscriptionInfo.FromString(b)] for b in answers.values()]
            return merge_subscriptions(infos)[0].SerializeToString()
        partition = reset.message_id.partition
        own = slots[0]  # refuses a partition out of range
        if 0 <= partition < held.partitions:
            own = self.admin.owners.slot_of(partition_name(name, partition))
        done = pb.SubscriptionInfo.FromString(
            (await self.admin.answers([own], RESET, request, context))[0]
        )
        others = await self._lists([s for s in slots if s != own], name, context)
        rest = [[i for i in infos if i.name == reset.subscription] for infos in others]
        return merge_subscriptions([[done], *rest])[0].SerializeToString()

    async def _lists(
        self, slots: list[int], name: str, context: Ctx
    ) -> list[list[pb.SubscriptionInfo]]:
        """The subscriptions of ``NAME`` in each of ``slots``; a slot without ``NAME``'s
        record (TOPIC_NOT_FOUND) has none; any other failure is relayed."""
        ask = pb.ListSubscriptionsRequest(topic=name).SerializeToString()
        lists = []
        for result in await self.admin.fan_out(slots, LIST, ask, self.admin.call_of(context)):
            if isinstance(result, grpc.aio.AioRpcError):
                if result.code() != grpc.StatusCode.NOT_FOUND:
                    await _relay(context, result)
                continue
            lists.append(list(pb.ListSubscriptionsResponse.FromString(result).subscriptions))
        return lists
