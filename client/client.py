"""``Client``: one gRPC channel to a compactlog server, the admin calls, and factories for
producers, readers and consumers (pulsar-client's shape: ``client.producer(topic)``...).

Every call has a deadline (CONTRACT section 12): unary calls take the client's
``timeout`` (seconds, default 30; ``None`` = no deadline, for callers that bound calls
themselves), a Consume its ``wait_ms`` on top; a stream is bounded while the client waits
for something the server owes it at once (its start; each response of a bounded read;
each PublishStream reply), not over a follow read's whole life (``deadlines``). A call
past its deadline raises ``Timeout``. Every ``grpc.RpcError`` leaves as a
``compactlog.errors`` class.

A server started with ``--auth-tokens`` wants ``token=``; one with ``--tls-cert`` wants
``tls_ca=``, the CA certificate file (PEM) that signed its certificate (docs/security.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal, cast

import grpc

from compactlog.channels import ChannelSecurity, open_channel
from compactlog.client import _convert as cv
from compactlog.client.closeable import Closeable
from compactlog.client.consumer import Consumer
from compactlog.client.deadlines import StreamWatch, Watchdog
from compactlog.client.errors import AlreadyClosed, call, cancel, from_rpc_error
from compactlog.client.producer import Producer
from compactlog.client.reader import Reader, StartLike
from compactlog.client.shard_routes import RoutedLog, Routes
from compactlog.client.types import (
    CompactionProgress,
    CompactionRun,
    CompactionStatus,
    CompactionVerification,
    Message,
    MessageId,
    TopicInfo,
)
from compactlog.errors import InvalidArgument
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

DEFAULT_ADDRESS = "127.0.0.1:7650"
DEFAULT_TIMEOUT_S = 30.0  # every call's deadline (CONTRACT sections 12, 13); None = none

_CHANNEL_OPTIONS = [
    # Read responses carry batches of messages; the server bounds them, not the client.
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
]


class Client(Closeable):
    """A connection to one server. Use as a context manager or call ``close()``."""

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        token: str | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> None:
        if timeout is not None and not timeout > 0:
            raise InvalidArgument(f"timeout must be a number of seconds > 0, not {timeout!r}")
        self.address = address
        self.timeout = timeout
        self._watchdog = Watchdog()
        security = ChannelSecurity.of(token, tls_ca)
        self._channel = open_channel(address, security, _CHANNEL_OPTIONS)
        self._admin = pb_grpc.TopicAdminStub(self._channel)
        self._log = pb_grpc.LogStub(self._channel)
        self._routes = Routes(
            self._log,
            self._admin,
            lambda owner: open_channel(owner, security, _CHANNEL_OPTIONS),
            timeout,
        )
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the channel; open readers' streams end with it."""
        if not self._closed:
            self._closed = True
            self._watchdog.close()
            self._routes.close()
            self._channel.close()

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("the client is closed")

    # -- admin ---------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        kind: Literal["ledger", "segmented"] | str = "ledger",
        config: Mapping[str, object] | None = None,
        partitions: int = 0,
    ) -> TopicInfo:
        """Create a topic (``partitions`` > 1: a partitioned topic, ``NAME-partition-i``);
        ``TopicExists`` if the name is taken."""
        self._check_open()
        req = pb.CreateTopicRequest(
            name=name,
            kind=cv.kind_to_pb(kind),
            config=cv.config_to_pb(config),
            partitions=partitions,
        )
        info = call(
            "CreateTopic", self.address, lambda: self._admin.CreateTopic(req, timeout=self.timeout)
        )
        return cv.topic_from_pb(info)

    def add_partitions(self, name: str, partitions: int) -> TopicInfo:
        """Grow a partitioned topic to ``partitions`` in all (never shrinks)."""
        self._check_open()
        req = pb.AddPartitionsRequest(name=name, partitions=partitions)
        info = call(
            "AddPartitions",
            self.address,
            lambda: self._admin.AddPartitions(req, timeout=self.timeout),
        )
        return cv.topic_from_pb(info)

    def get_topic(self, name: str) -> TopicInfo:
        """Name, kind, effective config and stats of one topic."""
        self._check_open()
        req = pb.GetTopicRequest(name=name)
        info = call(
            "GetTopic", self.address, lambda: self._admin.GetTopic(req, timeout=self.timeout)
        )
        return cv.topic_from_pb(info)

    def list_topics(self) -> list[TopicInfo]:
        self._check_open()
        resp = call(
            "ListTopics",
            self.address,
            lambda: self._admin.ListTopics(pb.ListTopicsRequest(), timeout=self.timeout),
        )
        return [cv.topic_from_pb(t) for t in resp.topics]

    def update_topic_config(
        self,
        name: str,
        set: Mapping[str, object] | None = None,
        remove: Sequence[str] | None = None,
    ) -> TopicInfo:
        """Set some keys and drop others (back to the server default) in one call."""
        self._check_open()
        req = pb.UpdateTopicConfigRequest(
            name=name, set=cv.config_to_pb(set), remove=list(remove or ())
        )
        info = call(
            "UpdateTopicConfig",
            self.address,
            lambda: self._admin.UpdateTopicConfig(req, timeout=self.timeout),
        )
        return cv.topic_from_pb(info)

    def delete_topic(self, name: str) -> None:
        self._check_open()
        req = pb.DeleteTopicRequest(name=name)
        call(
            "DeleteTopic", self.address, lambda: self._admin.DeleteTopic(req, timeout=self.timeout)
        )

    def compact(self, topic: str, wait: bool = False) -> CompactionStatus:
        """Start a compaction; ``wait=True`` returns the finished run's status.

        ``CompactionRunning`` if one is already running for the topic.
        """
        self._check_open()
        req = pb.CompactRequest(topic=topic, wait=False)
        status = cv.status_from_pb(
            call("Compact", self.address, lambda: self._admin.Compact(req, timeout=self.timeout))
        )
        # Waiting follows the run (updates at least once a second) rather than holding one
        # call open for as long as it takes: every wait stays under the client's timeout.
        while wait and status.running:
            for _update in self.watch_compaction(topic):
                pass
            status = self.compaction_status(topic)
        return status

    def compaction_status(self, topic: str) -> CompactionStatus:
        self._check_open()
        req = pb.GetCompactionStatusRequest(topic=topic)
        status = call(
            "GetCompactionStatus",
            self.address,
            lambda: self._admin.GetCompactionStatus(req, timeout=self.timeout),
        )
        return cv.status_from_pb(status)

    def watch_compaction(self, topic: str) -> Iterator[CompactionProgress]:
        """Progress of the topic's active compaction, at least once a second, ending with
        the run's final state; with no run active, the current state once. Closing the
        iterator (or leaving a ``for`` early) cancels the stream."""
        self._check_open()
        stream = self._admin.WatchCompaction(pb.WatchCompactionRequest(topic=topic))
        watch = StreamWatch(
            self._watchdog, self.timeout, lambda: cancel(stream), f"WatchCompaction {topic}"
        )
        try:
            while True:
                watch.arm()  # an update is owed at least once a second while a run is active
                try:
                    update = next(stream)
                except StopIteration:
                    return
                finally:
                    watch.disarm()
                yield cv.progress_from_pb(update)
        except grpc.RpcError as err:
            if watch.expired:
                raise watch.timeout_error() from None
            raise from_rpc_error(err, "WatchCompaction", self.address) from None
        finally:
            cancel(stream)

    def cancel_compaction(self, topic: str) -> CompactionStatus:
        """Stop the topic's active compaction: state CANCELLED, nothing of the run visible.
        ``CompactionNotRunning`` when no run is active."""
        self._check_open()
        req = pb.CancelCompactionRequest(topic=topic)
        status = call(
            "CancelCompaction",
            self.address,
            lambda: self._admin.CancelCompaction(req, timeout=self.timeout),
        )
        return cv.status_from_pb(status)

    def preview_compaction(self, topic: str) -> CompactionRun:
        """The figures a compaction started now would have; nothing is written."""
        self._check_open()
        req = pb.PreviewCompactionRequest(topic=topic)
        run = call(
            "PreviewCompaction",
            self.address,
            lambda: self._admin.PreviewCompaction(req, timeout=self.timeout),
        )
        return cv.run_from_pb(run)

    def verify_compaction(self, topic: str) -> CompactionVerification:
        """Recompute the compacted ledger from the raw history and compare (LEDGER)."""
        self._check_open()
        req = pb.VerifyCompactionRequest(topic=topic)
        resp = call(
            "VerifyCompaction",
            self.address,
            lambda: self._admin.VerifyCompaction(req, timeout=self.timeout),
        )
        return cv.verification_from_pb(resp)

    def enforce_retention(self, topic: str) -> TopicInfo:
        """Run the retention check for this topic now rather than at the next interval."""
        self._check_open()
        req = pb.EnforceRetentionRequest(topic=topic)
        info = call(
            "EnforceRetention",
            self.address,
            lambda: self._admin.EnforceRetention(req, timeout=self.timeout),
        )
        return cv.topic_from_pb(info)

    def delete_records(self, topic: str, before_offset: int) -> TopicInfo:
        """SEGMENTED topics: raise the log start offset (Kafka's DeleteRecords)."""
        self._check_open()
        req = pb.DeleteRecordsRequest(topic=topic, before_offset=before_offset)
        info = call(
            "DeleteRecords",
            self.address,
            lambda: self._admin.DeleteRecords(req, timeout=self.timeout),
        )
        return cv.topic_from_pb(info)

    def get_last_message_id(self, topic: str, read_compacted: bool = False) -> MessageId | None:
        """The last message's id, or ``None`` when there is none (empty, or every key deleted)."""
        self._check_open()
        req = pb.GetLastMessageIdRequest(topic=topic, read_compacted=read_compacted)
        resp = call(
            "GetLastMessageId",
            self.address,
            lambda: self._log_of(topic).GetLastMessageId(req, timeout=self.timeout),
        )
        return cv.id_from_pb(resp.id) if resp.HasField("id") else None

    def get_key_history(self, topic: str, key: bytes, max_messages: int = 0) -> list[Message]:
        """Every raw message of ``key``, oldest first, tombstones included (at most
        ``max_messages``, 0 = no limit; a response stops before 4 MiB)."""
        self._check_open()
        req = pb.GetKeyHistoryRequest(topic=topic, key=key, max_messages=max_messages)
        resp = call(
            "GetKeyHistory",
            self.address,
            lambda: self._log.GetKeyHistory(req, timeout=self.timeout),
        )
        return [cv.message_from_pb(m) for m in resp.messages]

    # -- data ----------------------------------------------------------------------------

    def _log_of(self, topic: str) -> pb_grpc.LogStub:
        """The Log service of ``topic``'s owner (``routing``): straight to the shard."""
        return cast(pb_grpc.LogStub, RoutedLog(self._routes, topic))

    def producer(self, topic: str) -> Producer:
        """A producer for ``topic``; the topic must exist (no auto-creation). For a
        partitioned topic (``GetTopic``) the producer routes records to partitions itself."""
        self._check_open()
        partitions = self.get_topic(topic).partitions
        return Producer(
            self._log_of(topic), topic, self.address, self.timeout, self._watchdog, partitions
        )

    def reader(
        self,
        topic: str,
        start: StartLike = "earliest",
        start_timestamp_ms: int | None = None,
        read_compacted: bool = False,
        follow: bool = False,
        max_messages: int = 0,
        as_of: MessageId | tuple[int, int] | None = None,
        as_of_time_ms: int | None = None,
    ) -> Reader:
        """Iterate messages from ``start`` (inclusive id, or earliest/latest) or a publish time.

        Without ``follow`` the iteration ends after the last message that existed when the
        read began; ``max_messages`` = 0 means no limit. Closing the reader cancels the stream.
        ``as_of`` (an id) or ``as_of_time_ms`` (the last id published at or before it), with
        ``read_compacted``: the compacted view as a compaction at that point would have
        written it (LEDGER topics).
        """
        self._check_open()
        return Reader(
            self._log_of(topic),
            topic,
            self.address,
            start=start,
            start_timestamp_ms=start_timestamp_ms,
            read_compacted=read_compacted,
            follow=follow,
            max_messages=max_messages,
            timeout=self.timeout,
            watchdog=self._watchdog,
            as_of=as_of,
            as_of_time_ms=as_of_time_ms,
        )

    def subscribe(
        self,
        topic: str,
        subscription: str,
        read_compacted: bool = False,
        initial_position: Literal["earliest", "latest"] = "earliest",
        receiver_queue_size: int = 1000,
    ) -> Consumer:
        """A consumer on a durable subscription (created on first use at ``initial_position``)."""
        self._check_open()
        return Consumer(
            self._log_of(topic),
            topic,
            subscription,
            self.address,
            timeout=self.timeout,
            read_compacted=read_compacted,
            initial_position=initial_position,
            receiver_queue_size=receiver_queue_size,
        )
