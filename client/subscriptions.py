"""The subscription calls of ``Client`` (CONTRACT section 6): list, delete, reset.

A base of ``Client``, kept apart so that the client module stays one job. The server's
own subscriptions (names beginning with ``__``) are listed but can be neither deleted
nor reset (``ReservedSubscription``); these calls need the ``admin`` role.
"""

from __future__ import annotations

from typing import Literal, cast

from compactlog.client import _convert as cv
from compactlog.client.errors import call
from compactlog.client.types import SubscriptionInfo, SubscriptionTypeName
from compactlog.errors import InvalidArgument
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

_TYPES: dict[str, pb.SubscriptionType.ValueType] = {
    "exclusive": pb.EXCLUSIVE,
    "shared": pb.SHARED,
    "failover": pb.FAILOVER,
}


def subscription_type_to_pb(consumer_type: object) -> pb.SubscriptionType.ValueType:
    """``"shared"``, ``"Shared"``, ``"SHARED"`` or an enum member named so (pulsar-client's
    ``ConsumerType.Shared``) as the wire's ``SubscriptionType``."""
    name = getattr(consumer_type, "name", consumer_type)
    found = _TYPES.get(str(name).lower())
    if found is None:
        raise InvalidArgument(
            f"consumer_type must be exclusive, shared or failover, not {consumer_type!r}"
        )
    return found


def subscription_from_pb(info: pb.SubscriptionInfo) -> SubscriptionInfo:
    mark = cv.id_from_pb(info.mark_delete) if info.HasField("mark_delete") else None
    kind = cast(SubscriptionTypeName, pb.SubscriptionType.Name(info.type))
    return SubscriptionInfo(info.name, kind, mark, info.backlog)


def reset_cursor_request(
    topic: str,
    subscription: str,
    position: Literal["earliest", "latest"] | None,
    message_id: cv.MessageIdLike | None,
    timestamp_ms: int | None,
) -> pb.ResetCursorRequest:
    """The ResetCursor request for exactly one of position, message id or timestamp."""
    given = [x is not None for x in (position, message_id, timestamp_ms)]
    if sum(given) != 1:
        raise InvalidArgument("give exactly one of position, message_id, timestamp_ms")
    req = pb.ResetCursorRequest(topic=topic, subscription=subscription)
    if position is not None:
        if position not in ("earliest", "latest"):
            raise InvalidArgument(f"position must be earliest or latest, not {position!r}")
        req.position = pb.EARLIEST if position == "earliest" else pb.LATEST
    elif message_id is not None:
        req.message_id.CopyFrom(cv.id_to_pb(message_id))
    else:
        req.timestamp_ms = int(timestamp_ms or 0)
    return req


class SubscriptionCalls:
    """Needs the client's address, timeout, TopicAdmin stub and open check."""

    address: str
    timeout: float | None
    _admin: pb_grpc.TopicAdminStub

    def _check_open(self) -> None:
        raise NotImplementedError

    def list_subscriptions(self, topic: str) -> list[SubscriptionInfo]:
        """Every subscription of ``topic`` by name, the server's own included."""
        self._check_open()
        req = pb.ListSubscriptionsRequest(topic=topic)
        resp = call(
            "ListSubscriptions",
            self.address,
            lambda: self._admin.ListSubscriptions(req, timeout=self.timeout),
        )
        return [subscription_from_pb(s) for s in resp.subscriptions]

    def delete_subscription(self, topic: str, subscription: str) -> None:
        """Drop a subscription and its acknowledgements."""
        self._check_open()
        req = pb.DeleteSubscriptionRequest(topic=topic, subscription=subscription)
        call(
            "DeleteSubscription",
            self.address,
            lambda: self._admin.DeleteSubscription(req, timeout=self.timeout),
        )

    def reset_cursor(
        self,
        topic: str,
        subscription: str,
        position: Literal["earliest", "latest"] | None = None,
        message_id: cv.MessageIdLike | None = None,
        timestamp_ms: int | None = None,
    ) -> SubscriptionInfo:
        """Move a subscription (Pulsar's resetCursor): its acknowledgements are forgotten
        and delivery starts again at ``position``, at ``message_id`` (inclusive) or at
        the first message published at or after ``timestamp_ms``; exactly one of them."""
        self._check_open()
        req = reset_cursor_request(topic, subscription, position, message_id, timestamp_ms)
        resp = call(
            "ResetCursor",
            self.address,
            lambda: self._admin.ResetCursor(req, timeout=self.timeout),
        )
        return subscription_from_pb(resp)
