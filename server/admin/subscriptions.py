"""TopicAdmin's subscription calls: ListSubscriptions, DeleteSubscription, ResetCursor.

Both topic kinds alike, through their ``TopicLog``; the server's own subscriptions
(``__compaction``) are listed but neither moved nor deleted. On a partitioned ``NAME`` the
calls act on the partitions this store holds (``merged_log``), each with the same
subscription name, and a list is folded by ``merge_subscriptions`` (which the front also
uses). What each call does to consumers and partitions is in docs/subscriptions.md
("Partitioned topics").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from compactlog.errors import SubscriptionNotFound
from compactlog.server.broker import Broker
from compactlog.server.log.dispatchers import Dispatchers, subscription_cursor, type_of
from compactlog.server.log.partitioned import MergedLog, merged_log
from compactlog.server.rpc.convert import id_from_pb, id_to_pb, start_position
from compactlog.storage.cursor import Cursor
from compactlog.storage.names import check_client_subscription
from compactlog.storage.topic_log import TopicLog
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb


def subscription_info(log: TopicLog, cursor: Cursor) -> pb.SubscriptionInfo:
    info = pb.SubscriptionInfo(
        name=cursor.name,
        type=type_of(cursor),
        backlog=log.backlog(cursor),  # type: ignore[arg-type]
    )
    if cursor.mark_delete is not None:
        id_to_pb(cursor.mark_delete, info.mark_delete)
        info.mark_delete.partition = log.partition  # NAME-partition-i's ids carry i
    return info


def merge_subscriptions(
    lists: Iterable[Iterable[pb.SubscriptionInfo]],
) -> list[pb.SubscriptionInfo]:
    """The subscriptions of a partitioned ``NAME`` from its partitions' lists (or, in the
    front, its slots' merged lists: the fold is associative), by name: backlogs summed,
    the type of the first list having it (the same everywhere unless partitions were
    consumed alone with different types). ``mark_delete`` stays unset: it is a position
    in one partition, which ListSubscriptions on ``NAME-partition-i`` gives (as
    ``TopicInfo`` of ``NAME`` leaves first and last ids unset)."""
    merged: dict[str, pb.SubscriptionInfo] = {}
    for infos in lists:
        for info in infos:
            found = merged.get(info.name)
            if found is None:
                merged[info.name] = pb.SubscriptionInfo(name=info.name, type=info.type)
                found = merged[info.name]
            found.backlog += info.backlog
    return [merged[name] for name in sorted(merged)]


def reset_target(log: TopicLog, request: pb.ResetCursorRequest) -> MessageId:
    """The first id delivery starts at after the reset."""
    which = request.WhichOneof("target")
    if which == "message_id":
        return log.check_start(id_from_pb(request.message_id))
    if which == "timestamp_ms":
        return log.at_time(request.timestamp_ms)
    if which == "position" and start_position(request.position) == pb.LATEST:
        return log.latest()
    return log.earliest()


class SubscriptionAdmin:
    def __init__(self, broker: Broker, dispatchers: Dispatchers, wake: Callable[[str], None]):
        self.broker = broker
        self.dispatchers = dispatchers
        self.wake = wake  # tells waiting consumers of a topic to look again

    def list(self, topic: str) -> pb.ListSubscriptionsResponse:
        merged = merged_log(self.broker, topic)
        logs = merged.logs if merged is not None else [self.broker.log(topic)]
        lists = [[subscription_info(log, c) for c in log.subscriptions()] for log in logs]
        if merged is None:
            return pb.ListSubscriptionsResponse(subscriptions=lists[0])
        return pb.ListSubscriptionsResponse(subscriptions=merge_subscriptions(lists))

    def delete(self, topic: str, subscription: str) -> None:
        merged = merged_log(self.broker, topic)
        if merged is None:
            self._delete(self.broker.log(topic), subscription)
            return
        check_client_subscription(subscription, topic)
        _every(merged, subscription, lambda log: self._delete(log, subscription))
        self.wake(topic)  # a Consume of NAME waits on NAME

    def reset(self, request: pb.ResetCursorRequest) -> pb.SubscriptionInfo:
        merged = merged_log(self.broker, request.topic)
        if merged is None:
            return self._reset(self.broker.log(request.topic), request)
        check_client_subscription(request.subscription, request.topic)
        if request.WhichOneof("target") == "message_id":
            self._reset(merged.of_id(request.message_id), request)
        else:
            _every(merged, request.subscription, lambda log: self._reset(log, request))
        self.wake(request.topic)
        infos = [
            [
                subscription_info(log, c)
                for c in log.subscriptions()
                if c.name == request.subscription
            ]
            for log in merged.logs
        ]
        return merge_subscriptions(infos)[0]

    # ---- one topic (or partition) -----------------------------------------------------

    def _delete(self, log: TopicLog, subscription: str) -> None:
        check_client_subscription(subscription, log.name)
        log.delete_subscription(subscription)
        self.dispatchers.forget(log.name, subscription)
        self.wake(log.name)

    def _reset(self, log: TopicLog, request: pb.ResetCursorRequest) -> pb.SubscriptionInfo:
        check_client_subscription(request.subscription, log.name)
        subscription_cursor(log, request.subscription)
        cursor = log.reset_subscription(request.subscription, reset_target(log, request))
        self.dispatchers.reset(log.name, request.subscription)
        self.wake(log.name)
        return subscription_info(log, cursor)


def _every(merged: MergedLog, subscription: str, act: Callable[[TopicLog], object]) -> None:
    """``act`` on every partition having ``subscription``; SUBSCRIPTION_NOT_FOUND only
    when none of them has it."""
    done = 0
    for log in merged.logs:
        try:
            act(log)
        except SubscriptionNotFound:
            continue
        done += 1
    if not done:
        raise SubscriptionNotFound(
            f"subscription {subscription!r} does not exist on any partition of {merged.name!r}",
            topic=merged.name,
            subscription=subscription,
        )
