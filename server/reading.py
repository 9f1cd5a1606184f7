"""Read and Consume: resolve a start, stream batches, follow the tail.

Responses are the stored batches' payloads spliced together (``storage.read_range``):
a batch's payload is already the wire encoding of ``ReadResponse.messages``, so no
message is decoded or re-encoded; ``read.batch.max.messages`` and 4 MiB cap each
response. Handlers return response bytes; the Log service registers them with a
pass-through serializer (``log_service.log_handler``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from compactlog.errors import InvalidArgument
from compactlog.server.broker import Broker
from compactlog.server.convert import fill_message, id_from_pb
from compactlog.server.segment_subscriptions import SegmentSubscriptions
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.read_range import read_chunks
from compactlog.storage.types import MessageId, TopicKind
from compactlog.storage.views import compacted_view, last_compacted_id, raw_view
from compactlog.v1 import compactlog_pb2 as pb

FOLLOW_POLL_S = 0.2


def _after(msg_id: MessageId | None) -> MessageId:
    return MessageId(0, 0) if msg_id is None else msg_id.next()


class Reading:
    def __init__(self, broker: Broker, batch_size: int) -> None:
        self.broker = broker
        self.batch_size = batch_size
        self._sub_locks: dict[tuple[str, str], threading.Lock] = {}
        self._sub_locks_guard = threading.Lock()
        self._stopping = threading.Event()
        self.segment_subscriptions = SegmentSubscriptions(broker.segments, batch_size)

    def stop_waiting(self) -> None:
        """At shutdown: end follow streams and Consume waits so in-flight calls finish."""
        self._stopping.set()

    def _live(self, is_active: Callable[[], bool]) -> Callable[[], bool]:
        stopping = self._stopping.is_set
        return lambda: is_active() and not stopping()

    # ---- Read -----------------------------------------------------------------------

    def read(
        self, req: pb.ReadRequest, is_active: Callable[[], bool]
    ) -> Iterator[tuple[bytes, int]]:
        """``(ReadResponse bytes, message count)`` per response."""
        is_active = self._live(is_active)
        if self.broker.kind(req.topic) == TopicKind.LEDGER:
            yield from self._read_ledger(req, is_active)
        else:
            yield from self._read_segmented(req, is_active)

    def _ledger_start(self, store: LedgerStore, req: pb.ReadRequest) -> MessageId:
        topic = store.topic(req.topic)
        which = req.WhichOneof("start")
        if which == "message_id":
            return id_from_pb(req.message_id)
        if which == "timestamp_ms":
            found = store.find_by_timestamp(req.topic, req.timestamp_ms)
            return found if found is not None else _after(topic.lac)
        if which == "position" and req.position == pb.LATEST:
            return _after(topic.lac)
        return MessageId(0, 0)

    def _read_ledger(
        self, req: pb.ReadRequest, is_active: Callable[[], bool]
    ) -> Iterator[tuple[bytes, int]]:
        store = self.broker.ledgers
        name = req.topic
        topic = store.topic(name)
        start = self._ledger_start(store, req)
        view = compacted_view if req.read_compacted else raw_view
        remaining = req.max_messages or -1
        while True:
            stop = topic.lac
            if stop is not None and start <= stop:
                batches = view(store, name, start, stop)
                label = f"topic {name!r}"
                for chunk in read_chunks(batches, label, stop, self.batch_size, max(remaining, 0)):
                    if chunk.count:
                        yield chunk.to_bytes(), chunk.count
                        remaining -= chunk.count
                    if remaining == 0:
                        return
                start = _after(stop)
            if not req.follow:
                return
            with topic.data_cond:
                while (topic.lac is None or topic.lac < start) and is_active():
                    if topic.deleted or topic.closed:
                        return
                    topic.data_cond.wait(FOLLOW_POLL_S)
            if not is_active():
                return

    def _read_segmented(
        self, req: pb.ReadRequest, is_active: Callable[[], bool]
    ) -> Iterator[bytes]:
        segs = self.broker.segments
        name = req.topic
        which = req.WhichOneof("start")
        if which == "message_id":
            if req.message_id.ledger_id != 0:
                raise InvalidArgument(
                    "SEGMENTED topics use ids with ledger_id 0 (entry_id = offset)"
                )
            offset = req.message_id.entry_id
        elif which == "timestamp_ms":
            found = segs.offset_for_timestamp(name, req.timestamp_ms)
            offset = found if found is not None else segs.log_end_offset(name)
        elif which == "position" and req.position == pb.LATEST:
            offset = segs.log_end_offset(name)
        else:
            offset = segs.log_start_offset(name)
        remaining = req.max_messages or -1
        end = segs.log_end_offset(name)
        while True:
            while offset < end:
                want = self.batch_size if remaining < 0 else min(self.batch_size, remaining)
                msgs = segs.read(name, offset, want)
                msgs = [m for m in msgs if m.id.entry_id < end]
                if not msgs:
                    break
                resp = pb.ReadResponse()
                for msg in msgs:
                    fill_message(resp.messages.add(), msg)
                yield resp.SerializeToString(), len(msgs)
                offset = msgs[-1].id.entry_id + 1
                remaining -= len(msgs)
                if remaining == 0:
                    return
            if not req.follow:
                return
            while is_active() and segs.has_topic(name) and segs.log_end_offset(name) <= offset:
                time.sleep(0.05)
            if not is_active() or not segs.has_topic(name):
                return
            end = segs.log_end_offset(name)

    # ---- Consume --------------------------------------------------------------------

    def _sub_lock(self, topic: str, sub: str) -> threading.Lock:
        with self._sub_locks_guard:
            return self._sub_locks.setdefault((topic, sub), threading.Lock())

    def consume(self, req: pb.ConsumeRequest, is_active: Callable[[], bool]) -> tuple[bytes, int]:
        """``(ConsumeResponse bytes, count)`` of the next unacknowledged messages, waiting
        up to ``wait_ms`` for some."""
        is_active = self._live(is_active)
        if self.broker.kind(req.topic) == TopicKind.SEGMENTED:
            lock = self._sub_lock(req.topic, req.subscription)
            resp = self.segment_subscriptions.consume(req, is_active, lock)
            return resp.SerializeToString(), len(resp.messages)
        store = self.broker.ledgers
        topic = store.topic(req.topic)
        cursor = store.open_cursor(
            req.topic, req.subscription, latest=req.initial_position == pb.LATEST
        )
        if req.redeliver_unacknowledged:
            with topic.lock:
                cursor.read_position = cursor.mark_delete
        view = compacted_view if req.read_compacted else raw_view
        limit = req.max_messages or self.batch_size
        deadline = time.monotonic() + req.wait_ms / 1000.0
        with self._sub_lock(req.topic, req.subscription):
            while True:
                with topic.lock:
                    start, stop = _after(cursor.read_position), topic.lac
                    skip = cursor.is_acked if cursor.acked else None
                if stop is not None and start <= stop:
                    batches = view(store, req.topic, start, stop)
                    label = f"topic {req.topic!r}"
                    chunk = next(read_chunks(batches, label, stop, limit, skip=skip), None)
                    if chunk is not None and chunk.last_id is not None:
                        with topic.lock:
                            if cursor.read_position is None or chunk.last_id > cursor.read_position:
                                cursor.read_position = chunk.last_id
                        if chunk.count:
                            return chunk.to_bytes(), chunk.count
                        continue  # everything in that range was acknowledged already
                timeout = deadline - time.monotonic()
                if timeout <= 0 or not is_active():
                    return b"", 0
                with topic.data_cond:
                    if topic.lac == stop and not topic.deleted:
                        topic.data_cond.wait(min(timeout, FOLLOW_POLL_S))
                    if topic.deleted:
                        return b"", 0

    def last_message_id(self, topic: str, read_compacted: bool) -> MessageId | None:
        if self.broker.kind(topic) == TopicKind.LEDGER:
            store = self.broker.ledgers
            return last_compacted_id(store, topic) if read_compacted else store.topic(topic).lac
        stats = self.broker.segments.stats(topic)
        return MessageId(0, stats.last_offset) if stats.last_offset is not None else None
