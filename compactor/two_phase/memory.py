"""An in-memory twin of the ledger store, as far as the compactor sees it.

It satisfies ``CompactionStorage`` with plain lists and dicts so the compactor's tests
run in milliseconds; the same contract tests run over it and over the RocksDB adapter.
``publish`` and ``compacted_view`` are test conveniences with the store's semantics
(the view: compacted entries, then raw entries after the horizon).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from compactlog.compactor.two_phase.storage import (
    CompactionInput,
    KeyEntry,
    NewEntry,
    Segment,
    tail_segments,
)
from compactlog.errors import CommitConflict, DataLoss, StorageError, TopicNotFound
from compactlog.storage.codec import key_flags
from compactlog.storage.types import MessageId, Record
from compactlog.v1 import compactlog_pb2 as pb


@dataclass
class MemoryLedger:
    topic: str
    entries: list[tuple[bytes, bytes | None, int]] = field(default_factory=list)  # data, key, flags
    sealed: bool = False


@dataclass
class MemoryTopic:
    ledgers: list[int] = field(default_factory=list)
    cursor_created: bool = False
    mark_delete: MessageId | None = None
    compacted_ledger: int | None = None
    retain_null_key: bool = False
    ledger_max_entries: int = 4


class InMemoryCompactionStorage:
    def __init__(self) -> None:
        self.topics: dict[str, MemoryTopic] = {}
        self.ledgers: dict[int, MemoryLedger] = {}
        self._next_ledger = 1
        self.clock_ms = 1_000

    # ---- test conveniences ----------------------------------------------------------

    def create_topic(
        self, name: str, retain_null_key: bool = False, ledger_max_entries: int = 4
    ) -> None:
        self.topics[name] = MemoryTopic(
            retain_null_key=retain_null_key, ledger_max_entries=ledger_max_entries
        )

    def _new_ledger(self, topic: str) -> int:
        lid = self._next_ledger
        self._next_ledger += 1
        self.ledgers[lid] = MemoryLedger(topic)
        return lid

    def publish(self, name: str, records: Sequence[Record]) -> list[MessageId]:
        t = self._topic(name)
        ids = []
        for rec in records:
            if not t.ledgers or len(self.ledgers[t.ledgers[-1]].entries) >= t.ledger_max_entries:
                t.ledgers.append(self._new_ledger(name))
            led = self.ledgers[t.ledgers[-1]]
            self.clock_ms += 1
            msg_id = MessageId(t.ledgers[-1], len(led.entries))
            msg = pb.Message(
                id=pb.MessageId(ledger_id=msg_id.ledger_id, entry_id=msg_id.entry_id),
                key=rec.key,
                value=rec.value,
                properties=rec.properties or {},
                publish_time_ms=self.clock_ms,
                event_time_ms=rec.event_time_ms or self.clock_ms,
            )
            led.entries.append((msg.SerializeToString(), rec.key, key_flags(rec.key, rec.value)))
            ids.append(msg_id)
        return ids

    def lac(self, name: str) -> MessageId | None:
        for lid in reversed(self._topic(name).ledgers):
            if self.ledgers[lid].entries:
                return MessageId(lid, len(self.ledgers[lid].entries) - 1)
        return None

    def compacted_view(self, name: str) -> list[pb.Message]:
        """Compacted ledger entries, then raw entries after the horizon."""
        t = self._topic(name)
        out: list[pb.Message] = []
        if t.compacted_ledger is not None:
            for data, _key, _flags in self.ledgers[t.compacted_ledger].entries:
                out.append(pb.Message.FromString(data))
        for lid in t.ledgers:
            for eid, (data, _key, _flags) in enumerate(self.ledgers[lid].entries):
                if t.mark_delete is None or MessageId(lid, eid) > t.mark_delete:
                    out.append(pb.Message.FromString(data))
        return out

    def _topic(self, name: str) -> MemoryTopic:
        t = self.topics.get(name)
        if t is None:
            raise TopicNotFound(f"topic {name!r} does not exist", topic=name)
        return t

    # ---- CompactionStorage ----------------------------------------------------------

    def begin(self, topic: str) -> CompactionInput:
        t = self._topic(topic)
        t.cursor_created = True
        previous = t.compacted_ledger
        prev_horizon = t.mark_delete if previous is not None else None
        segments: list[Segment] = []
        if previous is not None:
            led = self.ledgers.get(previous)
            if led is None:
                raise DataLoss(
                    f"compacted ledger {previous} of topic {topic!r} is missing",
                    topic=topic,
                    ledger=previous,
                )
            if led.entries:
                segments.append(Segment(previous, 0, len(led.entries) - 1, True))
        stop = self.lac(topic)
        horizon = prev_horizon
        if stop is not None and (prev_horizon is None or stop > prev_horizon):
            horizon = stop
            pairs = [(lid, len(self.ledgers[lid].entries)) for lid in t.ledgers]
            segments += tail_segments(pairs, prev_horizon, stop)
        return CompactionInput(
            topic, previous, prev_horizon, horizon, tuple(segments), t.retain_null_key
        )

    def _entries(self, segment: Segment) -> list[tuple[bytes, bytes | None, int]]:
        led = self.ledgers.get(segment.ledger_id)
        if led is None or len(led.entries) <= segment.last_entry:
            raise DataLoss(
                f"ledger {segment.ledger_id} lacks entries of {segment}", ledger=segment.ledger_id
            )
        return led.entries

    def read_keys(self, segment: Segment, reverse: bool = False) -> Iterator[KeyEntry]:
        entries = self._entries(segment)
        ids = range(segment.first_entry, segment.last_entry + 1)
        for eid in reversed(ids) if reverse else ids:
            data, key, flags = entries[eid]
            yield eid, flags, len(data), key

    def read_entries(
        self, segment: Segment, select: bytearray | None = None
    ) -> Iterator[tuple[int, bytes]]:
        entries = self._entries(segment)
        for eid in range(segment.first_entry, segment.last_entry + 1):
            off = eid - segment.first_entry
            if select is None or select[off >> 3] >> (off & 7) & 1:
                yield eid, entries[eid][0]

    def create_ledger(self, topic: str) -> int:
        self._topic(topic)
        return self._new_ledger(topic)

    def append(self, ledger_id: int, entries: Sequence[NewEntry]) -> None:
        led = self.ledgers[ledger_id]
        if led.sealed:
            raise StorageError(f"ledger {ledger_id} is sealed")
        for entry_id, data, key, flags in entries:
            if entry_id != len(led.entries):
                raise StorageError(f"ledger {ledger_id}: entry {entry_id} out of order")
            led.entries.append((data, key, flags))

    def seal(self, ledger_id: int) -> None:
        self.ledgers[ledger_id].sealed = True

    def delete_ledger(self, ledger_id: int) -> None:
        self.ledgers.pop(ledger_id, None)

    def commit(
        self,
        topic: str,
        ledger_id: int,
        horizon: MessageId,
        expected_previous: int | None,
        incarnation: int = 0,
    ) -> None:
        t = self._topic(topic)
        if t.compacted_ledger != expected_previous:
            raise CommitConflict(
                f"compacted ledger of {topic!r} is {t.compacted_ledger}, "
                f"expected {expected_previous}",
                topic=topic,
            )
        t.compacted_ledger, t.mark_delete = ledger_id, horizon
