"""Consume and Acknowledge on SEGMENTED topics: a durable cursor per subscription over
offsets (Kafka's committed group offset, plus individual acks as on LEDGER topics).

Offsets removed by cleaning or retention are skipped: the successor of an offset is the
next one that still exists, so acknowledgements advance the mark-delete position across
the gaps compaction leaves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from compactlog.errors import InvalidArgument
from compactlog.server.convert import fill_message
from compactlog.storage.segmented.manager import SegmentedLogManager
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

POLL_S = 0.05


class SegmentSubscriptions:
    def __init__(self, segments: SegmentedLogManager, batch_size: int) -> None:
        self.segments = segments
        self.batch_size = batch_size

    def _successor(self, name: str) -> Callable[[MessageId | None], MessageId | None]:
        def successor(msg_id: MessageId | None) -> MessageId | None:
            start = 0 if msg_id is None else msg_id.entry_id + 1
            start = max(start, self.segments.log_start_offset(name))
            found = self.segments.read(name, start, 1)
            return found[0].id if found else None

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
        resp = pb.ConsumeResponse()
        with lock:
            if req.redeliver_unacknowledged:
                cursor.read_position = cursor.mark_delete
            while True:
                pos = cursor.read_position
                start = max(0 if pos is None else pos.entry_id + 1, segs.log_start_offset(name))
                scanned = segs.read(name, start, limit)
                for msg in scanned:
                    if not cursor.is_acked(msg.id):
                        fill_message(resp.messages.add(), msg)
                if scanned:
                    cursor.read_position = scanned[-1].id
                if resp.messages:
                    return resp
                if not scanned and (time.monotonic() >= deadline or not is_active()):
                    return resp
                if not scanned:
                    time.sleep(POLL_S)

    def acknowledge(
        self, name: str, subscription: str, msg_id: MessageId, cumulative: bool
    ) -> None:
        if msg_id.ledger_id != 0:
            raise InvalidArgument("SEGMENTED topics use ids with ledger_id 0 (entry_id = offset)")
        self.segments.cursors(name).acknowledge(
            subscription, msg_id, cumulative, self._successor(name)
        )
