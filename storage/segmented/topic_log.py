"""``TopicLog`` over one SEGMENTED topic: offsets as ids ``(0, offset)``.

Appends are visible as soon as they are written (Kafka's high watermark on a single
replica); ``synced`` says whether ``flush.messages``/``flush.ms`` put them on disk.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from compactlog.errors import MalformedRequest, OffsetOutOfRange
from compactlog.storage.chains import until_failed
from compactlog.storage.cursor import Cursor
from compactlog.storage.read_range import ViewBatch
from compactlog.storage.segmented.append import AppendResult
from compactlog.storage.segmented.manager import SegmentedLogManager
from compactlog.storage.spanning import SpanningPart
from compactlog.storage.topic_log import AlreadyDurable, Durable, IdRun
from compactlog.storage.types import MessageId, TopicKind


class SegmentAppended:
    """A SEGMENTED append: written (and flushed when the flush policy said so) already."""

    def __init__(self, result: AppendResult) -> None:
        self.runs: list[IdRun] = [(0, result.base_offset, result.count)] if result.count else []
        self.synced = result.synced

    def on_durable(self, done: Durable) -> None:
        done(None)


class SegmentedTopicLog:
    kind = TopicKind.SEGMENTED

    def __init__(self, manager: SegmentedLogManager, name: str, partition: int = 0) -> None:
        self.manager = manager
        self.name = name
        self.partition = partition  # set on NAME-partition-i: goes into every id
        self.log = manager.get_log(name)  # TopicNotFound when there is none

    def gone(self) -> bool:
        return self.log.closed or not self.manager.has_topic(self.name)

    def generation(self) -> int:
        """The log's ``generation``: unchanged while nothing but appends changed it (a
        topic created again under this name has another)."""
        return self.log.generation

    def visible_end(self) -> MessageId | None:
        end = self.log.next_offset
        return MessageId(0, end - 1) if end else None

    def last_id(self, compacted: bool) -> MessageId | None:
        last = self.manager.stats(self.name).last_offset
        return MessageId(0, last) if last is not None else None

    def earliest(self) -> MessageId:
        return MessageId(0, self.log.log_start_offset)

    def latest(self) -> MessageId:
        return MessageId(0, self.log.next_offset)

    def at_time(self, timestamp_ms: int) -> MessageId:
        found = self.log.offset_for_timestamp(timestamp_ms)
        return MessageId(0, found) if found is not None else self.latest()

    def check_start(self, msg_id: MessageId) -> MessageId:
        if msg_id.ledger_id != 0:
            raise MalformedRequest(
                "SEGMENTED topics use ids with ledger_id 0 (entry_id = offset)",
                topic=self.name,
                ledger_id=msg_id.ledger_id,
            )
        if msg_id.entry_id < self.log.log_start_offset:
            raise OffsetOutOfRange(
                f"offset {msg_id.entry_id} is below the log start offset "
                f"{self.log.log_start_offset} of {self.name}",
                topic=self.name,
                offset=msg_id.entry_id,
                log_start_offset=self.log.log_start_offset,
            )
        return msg_id

    def batches(self, start: MessageId, stop: MessageId, compacted: bool) -> Iterator[ViewBatch]:
        """The log as cleaning left it (``compacted`` changes nothing on this kind)."""
        return self.log.batches(start.entry_id, stop.entry_id + 1, clamp=True)

    def open_cursor(
        self,
        subscription: str,
        latest: bool,
        read_compacted: bool = False,
        properties: dict[str, str] | None = None,
    ) -> Cursor:
        """(The cleaner keeps tombstones for ``delete.retention.ms`` whoever reads.)"""
        end = self.log.next_offset
        initial = MessageId(0, end - 1) if latest and end else None
        return self.manager.cursors(self.name).open(subscription, initial, properties)

    def cursor_in_memory(self, subscription: str, read_compacted: bool) -> Cursor | None:
        """(A SEGMENTED cursor records nothing of how it is read.)"""
        cursors = self.manager.cursors_in_memory(self.name)
        return None if cursors is None else cursors.in_memory(subscription)

    def subscriptions(self) -> list[Cursor]:
        return self.manager.cursors(self.name).all()

    def delete_subscription(self, subscription: str) -> None:
        self.manager.cursors(self.name).delete(subscription, self.name)

    def reset_subscription(self, subscription: str, start: MessageId) -> Cursor:
        mark = MessageId(0, start.entry_id - 1) if start.entry_id > 0 else None
        return self.manager.cursors(self.name).reset(subscription, mark, self.name)

    def backlog(self, cursor: Cursor) -> int:
        """Kafka's lag: offsets between the committed position and the log end offset
        (offsets the cleaner removed count, as they do in Kafka), less individual acks."""
        mark = cursor.mark_delete
        first = max(self.log.log_start_offset, 0 if mark is None else mark.entry_id + 1)
        return max(0, self.log.next_offset - first - cursor.acked.ids())

    def delivered(self, cursor: Cursor, last: MessageId | None, rewound: bool = False) -> None:
        cursor.deliver(last, rewound)

    def acknowledge(self, subscription: str, msg_id: MessageId, cumulative: bool) -> AlreadyDurable:
        """Kafka's offset commit: the journal line is synced before this returns. An id
        this subscription was never given is NOT_DELIVERED (``storage/cursor.py``)."""
        self.manager.cursors(self.name).acknowledge(
            subscription, msg_id, cumulative, self._successor, self._holds, self.name
        )
        return AlreadyDurable()

    def acknowledge_list(self, subscription: str, ids: Sequence[MessageId]) -> AlreadyDurable:
        """Individual acks of ``ids`` as one synced journal line, all or none."""
        self.manager.cursors(self.name).acknowledge_list(
            subscription, ids, self._successor, self._holds, self.name
        )
        return AlreadyDurable()

    def _holds(self, msg_id: MessageId) -> bool:
        """An offset the log has reached (one the cleaner or retention removed since
        counts: it may have been delivered before)."""
        return msg_id.ledger_id == 0 and msg_id.entry_id < self.log.next_offset

    def _successor(self, msg_id: MessageId | None) -> MessageId | None:
        """The next offset that still exists (cleaning and retention leave gaps)."""
        start = 0 if msg_id is None else msg_id.entry_id + 1
        last = self.manager.read_payload(
            self.name, max(start, self.log.log_start_offset), self.log.next_offset, 1, 1
        )[2]
        return None if last is None else MessageId(0, last)

    def append_request(self, request: bytes, part: SpanningPart | None = None) -> SegmentAppended:
        if part is not None:  # the front marks parts of LEDGER topics only
            raise MalformedRequest(
                f"topic {self.name!r} is SEGMENTED: a spanning publish's marked part is for "
                "LEDGER topics",
                request="PublishRequest",
            )
        return SegmentAppended(self.manager.append_request(self.name, request, self.partition))

    def append_requests(
        self,
        requests: Sequence[tuple[bytes, SpanningPart | None]],
        chains: Sequence[int] | None = None,
    ) -> list[SegmentAppended | Exception]:
        """One after the other, each whole or not at all on its own (segment files are
        written per batch: a failed request's bytes are cut back before the next); the
        later requests of a failed one's chain get its error unwritten."""
        return until_failed(requests, chains, lambda rp: self.append_request(*rp))
