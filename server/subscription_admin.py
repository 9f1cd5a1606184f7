"""TopicAdmin's subscription calls: ListSubscriptions, DeleteSubscription, ResetCursor.

Both topic kinds alike, through their ``TopicLog``. The server's own subscriptions
(``__compaction``) are listed but neither moved nor deleted (RESERVED_SUBSCRIPTION). A
delete drops the subscription's in-memory consumer state; a reset drops its pending and
due messages (delivery starts again from the new position, as in Pulsar) and wakes
waiting consumers to see it.
"""

from __future__ import annotations

from collections.abc import Callable

from compactlog.server.broker import Broker
from compactlog.server.convert import id_from_pb, id_to_pb, start_position
from compactlog.server.subscriptions import Dispatchers, subscription_cursor, type_of
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
    return info


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
        log = self.broker.log(topic)
        return pb.ListSubscriptionsResponse(
            subscriptions=[subscription_info(log, c) for c in log.subscriptions()]
        )

    def delete(self, topic: str, subscription: str) -> None:
        log = self.broker.log(topic)
        check_client_subscription(subscription, topic)
        log.delete_subscription(subscription)
        self.dispatchers.forget(topic, subscription)
        self.wake(topic)

    def reset(self, request: pb.ResetCursorRequest) -> pb.SubscriptionInfo:
        log = self.broker.log(request.topic)
        check_client_subscription(request.subscription, request.topic)
        subscription_cursor(log, request.subscription)
        cursor = log.reset_subscription(request.subscription, reset_target(log, request))
        self.dispatchers.reset(request.topic, request.subscription)
        self.wake(request.topic)
        return subscription_info(log, cursor)
