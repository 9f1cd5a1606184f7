"""The admin half of ``Client``: topics, compaction and ids (TopicAdmin, GetLastMessageId).

A mixin so that ``client.py`` keeps the connection and the data factories and each file
stays one job; ``Client`` supplies the channel's stubs, the address and the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

import grpc

from compactlog.client import _convert as cv
from compactlog.client.deadlines import StreamWatch, Watchdog
from compactlog.client.errors import call, cancel, from_rpc_error
from compactlog.client.reader_start import LastPosition, position_from_pb
from compactlog.client.types import (
    CompactionProgress,
    CompactionRun,
    CompactionStatus,
    CompactionVerification,
    MessageId,
    TopicInfo,
)
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

__all__ = ["AdminCalls"]

_POLL_S = 0.1  # compact(wait=True) on a partitioned topic polls its status this often


class AdminCalls:
    """Topic administration, compaction control and last ids, one unary call each."""

    address: str
    timeout: float | None
    _admin: pb_grpc.TopicAdminStub
    _watchdog: Watchdog

    def _check_open(self) -> None:
        raise NotImplementedError

    def _log_of(self, topic: str) -> pb_grpc.LogStub:
        raise NotImplementedError

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
        # A partitioned topic has one run per partition and no single stream to watch: its
        # aggregate status is polled instead.
        partitioned = wait and status.running and self.get_topic(topic).partitions > 1
        while wait and status.running:
            if partitioned:
                time.sleep(_POLL_S)
            else:
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
        return self.last_position(topic, read_compacted).id

    def last_position(self, topic: str, read_compacted: bool = False) -> LastPosition:
        """The last message's id (``None`` when there is none) and, for a partitioned
        topic, each partition's last id (the first is then only the greatest of them)."""
        self._check_open()
        req = pb.GetLastMessageIdRequest(topic=topic, read_compacted=read_compacted)
        resp = call(
            "GetLastMessageId",
            self.address,
            lambda: self._log_of(topic).GetLastMessageId(req, timeout=self.timeout),
        )
        return position_from_pb(resp)
