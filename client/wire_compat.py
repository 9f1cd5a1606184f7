"""Fields of the wire that this client sends or reads only once the server's proto has them.

CONTRACT section 6 adds ``ConsumeRequest.consumer_name`` / ``subscription_type``; they
land in ``proto/`` with the server work that gives them meaning. Until then the generated
messages lack them, and the client works without them (every consumer of a subscription
behaves as one EXCLUSIVE consumer). The
check is one look at the generated descriptor, made once at import, so nothing here
costs a lookup per message, and the code that sets the fields is already written and
typed for the day they exist. Delete this module once they have landed.
"""

from __future__ import annotations

from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["HAS_CONSUMER_NAME", "HAS_SUBSCRIPTION_TYPE", "set_consumer"]

HAS_CONSUMER_NAME = "consumer_name" in pb.ConsumeRequest.DESCRIPTOR.fields_by_name
HAS_SUBSCRIPTION_TYPE = "subscription_type" in pb.ConsumeRequest.DESCRIPTOR.fields_by_name


def set_consumer(req: pb.ConsumeRequest, subscription_type: int, consumer_name: str) -> None:
    """The consumer's type (``ConsumerType.value`` = the wire's ``SubscriptionType``) and
    name on a Consume, where the proto has the fields."""
    if HAS_SUBSCRIPTION_TYPE:
        setattr(req, "subscription_type", subscription_type)  # noqa: B010
    if HAS_CONSUMER_NAME:
        setattr(req, "consumer_name", consumer_name)  # noqa: B010
