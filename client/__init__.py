"""The compactlog Python client, with pulsar-client's names (CONTRACT section 13): ``Client``
with ``create_producer``, ``subscribe``, ``create_reader``, ``create_table_view`` and the
admin calls; ``MessageId``, ``ConsumerType``, ``InitialPosition``. ``compactlog.client.aio``
has the same calls as coroutines. The ``compactlog`` CLI is built on it.

    from compactlog.client import Client, MessageId

    with Client("127.0.0.1:7650") as client:
        client.create_topic("prices")
        client.create_producer("prices").send(b"189.5", partition_key="AAPL")
        reader = client.create_reader("prices", MessageId.earliest, is_read_compacted=True)
        msg = reader.read_next(timeout_millis=1000)
        print(msg.message_id(), msg.partition_key(), msg.value())

Errors are the classes of ``compactlog.errors`` (re-exported as ``errors``), never raw
``grpc.RpcError``: one class per reason of CONTRACT section 5 under ``CompactlogError``
(``TopicNotFound``, ``RecordTooLarge``, ``ConsumerBusy`` ...), chosen from the reason the
server puts in the status, plus ``Timeout``.
"""

from compactlog import errors
from compactlog._linked import only_as
from compactlog.client.batch_policy import ConsumerBatchReceivePolicy
from compactlog.client.client import DEFAULT_ADDRESS, Client
from compactlog.client.consumer import Consumer
from compactlog.client.enums import ConsumerType, InitialPosition, Result
from compactlog.client.errors import (
    AlreadyClosed,
    CompactionNotRunning,
    CompactionRunning,
    ConsumerBusy,
    CorruptData,
    DiskFull,
    FileLimit,
    InvalidConfig,
    InvalidTopicName,
    MalformedRequest,
    NotCompacted,
    NotDelivered,
    OffsetOutOfRange,
    PermissionDenied,
    RecordTooLarge,
    ReservedSubscription,
    ServerUnreachable,
    ShuttingDown,
    StorageUnavailable,
    SubscriptionNotFound,
    Timeout,
    TopicExists,
    TopicNotFound,
    Unauthenticated,
    WrongTopicKind,
)
from compactlog.client.multi_topic import MultiTopicConsumer
from compactlog.client.producer import Producer
from compactlog.client.reader import Reader
from compactlog.client.table_view import TableView
from compactlog.client.topic_producer import TopicProducer
from compactlog.client.topic_reader import TopicReader
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
    "ConsumerBatchReceivePolicy",
    "ConsumerBusy",
    "ConsumerType",
    "CorruptData",
    "DiskFull",
    "FileLimit",
    "InitialPosition",
    "InvalidConfig",
    "InvalidTopicName",
    "MalformedRequest",
    "Message",
    "MessageId",
    "MultiTopicConsumer",
    "NotCompacted",
    "NotDelivered",
    "OffsetOutOfRange",
    "PermissionDenied",
    "Producer",
    "Reader",
    "Record",
    "RecordTooLarge",
    "ReservedSubscription",
    "Result",
    "ServerUnreachable",
    "ShuttingDown",
    "StorageUnavailable",
    "SubscriptionInfo",
    "SubscriptionNotFound",
    "TableView",
    "Timeout",
    "TopicExists",
    "TopicInfo",
    "TopicNotFound",
    "TopicProducer",
    "TopicReader",
    "TopicStats",
    "Unauthenticated",
    "WrongTopicKind",
    "errors",
]
