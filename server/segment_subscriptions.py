"""Consume and Acknowledge on SEGMENTED topics: a durable cursor per subscription over
offsets (Kafka's committed group offset, plus individual acks as on LEDGER topics).

Offsets removed by cleaning or retention are skipped: the successor of an offset is the
next one that still exists, so acknowledgements advance the mark-delete position across
the gaps compaction leaves.

Delivery splices stored batch payloads: a batch's payload is the wire encoding of
``ConsumeResponse.messages``, so a response is the stored bytes of the records it
carries, parsed once by protobuf. Only individually acknowledged records, when there are
any, are cut out (their byte ranges come from ``batch.walk``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from compactlog.errors import InvalidArgument
from compactlog.storage.batch import walk
from compactlog.storage.cursor import Cursor
from compactlog.storage.segmented.manager import SegmentedLogManager
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

POLL_S = 0.05
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


def unacked(pieces: Sequence[memoryview | bytes], cursor: Cursor, where: str) -> bytes:
    """The records of ``pieces`` the cursor has not acknowledged, as one payload."""
    payload = b"".join(pieces)
    if not cursor.acked:
        return payload
    view = memoryview(payload)
    return b"".join(
        view[s:e]
        for ledger, entry, _f, _k, s, e in walk(payload, where)
        if not cursor.is_acked(MessageId(ledger, entry))
    )


class SegmentSubscriptions:
    def __init__(self, segments: SegmentedLogManager, batch_size: int) -> None:
        self.segments = segments
        self.batch_size = batch_size

    def _successor(self, name: str) -> Callable[[MessageId | None], MessageId | None]:
        def successor(msg_id: MessageId | None) -> MessageId | None:
            segs = self.segments
            start = 0 if msg_id is None else msg_id.entry_id + 1
            start = max(start, segs.log_start_offset(name))
            last = segs.read_payload(name, start, segs.log_end_offset(name), 1, 1)[2]
            return None if last is None else MessageId(0, last)

        return successor

    def consume(
        self, req: pb.ConsumeRequest, is_active: Callable[[], bool], lock: threading.Lock
    ) -> pb.ConsumeResponse:
        name, segs = req.topic, self.segments
        end = segs.log_end_offset(name)
        latest = MessageId(0, end - 1) if req.initial_position == pb.LATEST and end else None
        cursors = segs.cursors(name)
        cursor = cursors.open(req.subscription, latest)
        limit = req.max_messages or self.batch_size
        deadline = time.monotonic() + req.wait_ms / 1000.0
        with lock:
            if req.redeliver_unacknowledged:
                cursor.read_position = cursor.mark_delete
            while True:
                pos = cursor.read_position
                start = max(0 if pos is None else pos.entry_id + 1, segs.log_start_offset(name))
                pieces, _count, last = segs.read_payload(
                    name, start, segs.log_end_offset(name), limit, MAX_RESPONSE_BYTES
                )
                if last is not None:
                    cursor.read_position = MessageId(0, last)
                    payload = unacked(pieces, cursor, f"topic {name}")
                    if payload:
                        return pb.ConsumeResponse.FromString(payload)
                elif time.monotonic() >= deadline or not is_active():
                    return pb.ConsumeResponse()
                else:
                    time.sleep(POLL_S)

    def acknowledge(
        self, name: str, subscription: str, msg_id: MessageId, cumulative: bool
    ) -> None:
        if msg_id.ledger_id != 0:
            raise InvalidArgument("SEGMENTED topics use ids with ledger_id 0 (entry_id = offset)")
        self.segments.cursors(name).acknowledge(
            subscription, msg_id, cumulative, self._successor(name)
        )
