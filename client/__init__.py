"""The compactlog Python client: ``Client`` with admin calls, ``Producer``, ``Reader`` and
``Consumer`` (pulsar-client naming). The ``compactlog`` CLI is built on it, in
``compactlog.cli``.

    from compactlog.client import Client

    with Client("127.0.0.1:7650") as client:
        client.create_topic("prices")
        client.producer("prices").send("AAPL", "189.5")
        for msg in client.reader("prices", read_compacted=True):
            print(msg.id, msg.key, msg.value)

Errors are the classes of ``compactlog.errors`` (re-exported as ``errors``), never raw
``grpc.RpcError``: one class per reason of CONTRACT section 5 under ``CompactlogError``
(``TopicNotFound``, ``RecordTooLarge``, ``ConsumerBusy`` ...), chosen from the reason the
server puts in the status, plus ``Timeout``.
"""

from compactlog import errors
from compactlog._linked import only_as
from compactlog.client.client import DEFAULT_ADDRESS, Client
from compactlog.client.consumer import Consumer
from compactlog.client.errors import (
    AlreadyClosed,
    CompactionNotRunning,
    CompactionRunning,
    ConsumerBusy,
    CorruptData,
    InvalidConfig,
    InvalidTopicName,
    MalformedRequest,
    NotDelivered,
    OffsetOutOfRange,
    PermissionDenied,
    RecordTooLarge,
    ReservedSubscription,
    ServerUnreachable,
    ShuttingDown,
    SubscriptionNotFound,
    Timeout,
    TopicExists,
    TopicNotFound,
    Unauthenticated,
    WrongTopicKind,
)
from compactlog.client.producer import Producer
from compactlog.client.reader import Reader
from compactlog.client.types import (
    CompactionProgress,
    CompactionRun,
    CompactionStatus,
    CompactionVerification,
    Message,
    MessageId,
    Record,
    SubscriptionInfo,
    TopicInfo,
    TopicStats,
)
from compactlog.errors import CompactlogError

only_as(__name__, "compactlog.client")  # see compactlog/_linked.py

__all__ = [
    "DEFAULT_ADDRESS",
    "AlreadyClosed",
    "Client",
    "CompactionNotRunning",
    "CompactionProgress",
    "CompactionRun",
    "CompactionRunning",
    "CompactionStatus",
    "CompactionVerification",
    "CompactlogError",
    "Consumer",
    "ConsumerBusy",
    "CorruptData",
    "InvalidConfig",
    "InvalidTopicName",
    "MalformedRequest",
    "Message",
    "MessageId",
    "NotDelivered",
    "OffsetOutOfRange",
    "PermissionDenied",
    "Producer",
    "Reader",
    "Record",
    "RecordTooLarge",
    "ReservedSubscription",
    "ServerUnreachable",
    "ShuttingDown",
    "SubscriptionInfo",
    "SubscriptionNotFound",
    "Timeout",
    "TopicExists",
    "TopicInfo",
    "TopicNotFound",
    "TopicStats",
    "Unauthenticated",
    "WrongTopicKind",
    "errors",
]
