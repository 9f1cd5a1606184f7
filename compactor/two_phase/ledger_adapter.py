"""The in-process ``CompactionStorage`` over the RocksDB ``LedgerStore``, and the reads
it shares with a compaction worker's storage (``LedgerReads`` over any ``LedgerScans``:
the store itself, or a worker's secondary instance of it).

Both phases read the stored batches through ``batch.check`` (every batch's CRC is
verified by the compactor too) and walk them with the codec's compiled twin. A reverse
key read holds one batch at a time. Entries handed to the compactor are ``Message``
bytes with their original id, for raw and compacted ledgers alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from compactlog.compactor.two_phase.ledger_digests import key_digests, packed_digests
from compactlog.compactor.two_phase.storage import (
    CompactionInput,
    KeyEntry,
    NewEntry,
    Segment,
    StoredPayload,
    TombstoneRetention,
    tail_segments,
)
from compactlog.errors import CommitConflict, DataLoss, StorageError, TopicNotFound
from compactlog.storage import batch as batch_codec
from compactlog.storage.codec import ROLE_COMPACTED
from compactlog.storage.cursor import (
    COMPACTED_LEDGER_PROPERTY,
    COMPACTION_SUBSCRIPTION,
    Cursor,
)
from compactlog.storage.ledger_append import compacted_batch, compacted_records_batch, live_only
from compactlog.storage.ledger_scans import LedgerScans
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId

# The compactor runs in the server's process and holds the GIL while it scans; without a
# pause now and then, a publish waits out the interpreter's 5 ms switch interval at each of
# its several thread hand-offs (~40 ms p50 during a run, measured). sleep(0) releases the
# GIL so a waiting request thread runs at once. It is not free: the kernel's timer slack
# makes it last 50-80 us, so a pause every batch (about 100 us of work) doubled an as_of
# read's time. The pause comes at most once per PAUSE_EVERY_NS of work instead.
YIELD_MASK = 1023  # entries between looks at the clock
PAUSE_EVERY_NS = 500_000


class _Pacer:
    """``sleep(0)`` when ``PAUSE_EVERY_NS`` passed since the last one. Shared by the
    threads reading through one storage, so it paces them roughly, which is all it needs."""

    def __init__(self) -> None:
        self.last = time.monotonic_ns()

    def __call__(self) -> None:
        if time.monotonic_ns() - self.last >= PAUSE_EVERY_NS:
            time.sleep(0)
            self.last = time.monotonic_ns()


def _no_pause() -> None:
    pass


def backlog_bytes(store: LedgerStore, topic_name: str) -> int:
    """Estimated raw bytes after the ``__compaction`` mark-delete position (Pulsar's
    compaction backlog), pro rata inside the ledger holding the position."""
    topic = store.topic(topic_name)
    with topic.lock:
        cursor = topic.cursors.get(COMPACTION_SUBSCRIPTION)
        mark = cursor.mark_delete if cursor is not None else None
        total = 0
        for led in topic.ledgers:
            if not led.entries or (mark is not None and led.ledger_id < mark.ledger_id):
                continue
            if mark is not None and led.ledger_id == mark.ledger_id:
                left = max(0, led.entries - mark.entry_id - 1)
                total += led.bytes * left // led.entries
            else:
                total += led.bytes
        return total


def compacted_readers_at(cursors: Iterable[Cursor]) -> MessageId | None:
    """The lowest mark-delete position of the subscriptions reading compacted (one that
    acknowledged nothing yet: before every id); None when there is none."""
    marks = [
        c.mark_delete or MessageId(0, 0)
        for c in cursors
        if c.reads_compacted and c.name != COMPACTION_SUBSCRIPTION
    ]
    return min(marks) if marks else None


class LedgerReads:
    """``read_keys`` and ``read_entries`` of ``CompactionStorage`` over checked scans.

    ``pause`` is called every ``YIELD_MASK + 1`` entries and every batch: in the server it
    lets request threads have the GIL (``_Pacer``); a worker process has nobody to yield to.
    """

    def __init__(self, scans: LedgerScans, in_server: bool = True) -> None:
        self.scans = scans
        self.pause: Callable[[], None] = _Pacer() if in_server else _no_pause

    def read_keys(self, segment: Segment, reverse: bool = False) -> Iterator[KeyEntry]:
        """Keys from the checked batches; reversed, one batch in memory at a time."""
        lid, first, last = segment.ledger_id, segment.first_entry, segment.last_entry
        expected = last if reverse else first
        step = -1 if reverse else 1
        pause = self.pause
        for pos, flags, size, key in self.scans.keys_of(lid, first, last, reverse):
            if pos != expected:
                raise DataLoss(
                    f"ledger {lid} lacks entry {expected} (read {first}..{last})",
                    ledger=lid,
                    entry=expected,
                )
            expected += step
            if not pos & YIELD_MASK:
                pause()
            yield pos, flags, size, key
        if expected != (first - 1 if reverse else last + 1):
            raise DataLoss(
                f"ledger {lid} lacks entry {expected} (read {first}..{last})",
                ledger=lid,
                entry=expected,
            )

    def stored_batches(self, segment: Segment) -> Iterator[StoredPayload]:
        """The checked payloads holding the segment, in order (``BatchStorage``): each
        batch must start where the last ended, and the last reach the segment's end."""
        lid, first, last = segment.ledger_id, segment.first_entry, segment.last_entry
        expected = first
        for at, data, header in self.scans.batches(lid, first, last):
            if (
                at > expected
                or at + header.count <= expected
                or (expected > first and at < expected)
            ):
                break
            self.pause()
            yield at, batch_codec.payload_of(data, header), f"ledger {lid} entry {at}"
            expected = at + header.count
        if expected <= last:
            raise DataLoss(
                f"ledger {lid} lacks entry {expected} (read {first}..{last})",
                ledger=lid,
                entry=expected,
            )

    def read_entries(
        self, segment: Segment, select: bytearray | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """Message bytes (original id included) of the selected positions, in order."""
        lid, first, last = segment.ledger_id, segment.first_entry, segment.last_entry
        wanted = None if select is None else sum(bin(b).count("1") for b in select)
        hits = 0
        expected = first
        for at, data, header in self.scans.batches(lid, first, last):
            if at > expected:
                break
            self.pause()
            payload = batch_codec.payload_of(data, header)
            walked = batch_codec.walk(payload, f"ledger {lid} entry {at}")
            for pos, (_l, _e, _f, _k, s, e) in enumerate(walked, at):
                if pos < first or pos > last:
                    continue
                expected = pos + 1
                off = pos - first
                if select is None or select[off >> 3] >> (off & 7) & 1:
                    hits += 1
                    yield pos, batch_codec.record_body(payload, s, e)
        if select is None and expected != last + 1:
            raise DataLoss(
                f"ledger {lid} lacks entry {expected} (read {first}..{last})",
                ledger=lid,
                entry=expected,
            )
        if wanted is not None and hits != wanted:
            raise DataLoss(f"ledger {lid} lacks {wanted - hits} selected entries", ledger=lid)


class LedgerStoreCompactionStorage(LedgerReads):
    """``CompactionStorage`` over a ``LedgerStore`` in this process. ``in_server``: paced
    for the request threads beside it (previews, verify, ``as_of``); a program with no
    requests to serve (a benchmark of the compactor, a tool) passes False."""

    def __init__(self, store: LedgerStore, in_server: bool = True) -> None:
        super().__init__(store, in_server)
        self.store = store

    def begin(self, topic: str) -> CompactionInput:
        store = self.store
        t = store.topic(topic)
        with t.lock:
            if COMPACTION_SUBSCRIPTION not in t.cursors:
                store.open_cursor(topic, COMPACTION_SUBSCRIPTION)
            cursor = t.cursors[COMPACTION_SUBSCRIPTION]
            previous = t.compacted_ledger_id()
            prev_horizon = cursor.mark_delete if previous is not None else None
            stop = t.lac
            ledgers = [(led.ledger_id, led.entries) for led in t.ledgers]
            retain = t.config.compaction_retain_null_key
            incarnation = t.incarnation
            readers_at = compacted_readers_at(t.cursors.values())
            delete_retention_ms = t.config.delete_retention_ms
        segments: list[Segment] = []
        if previous is not None:
            meta = store.ledger(previous)
            if meta is None:
                raise DataLoss(
                    f"compacted ledger {previous} of topic {topic!r} is missing",
                    topic=topic,
                    ledger=previous,
                )
            if meta.entries:
                segments.append(Segment(previous, 0, meta.entries - 1, True))
        horizon = prev_horizon
        if stop is not None and (prev_horizon is None or stop > prev_horizon):
            horizon = stop
            segments += tail_segments(ledgers, prev_horizon, stop)
        now_ms = int(store.clock() * 1000)
        tombstones = TombstoneRetention.of(readers_at, delete_retention_ms, now_ms, horizon)
        return CompactionInput(
            topic, previous, prev_horizon, horizon, tuple(segments), retain, incarnation, tombstones
        )

    # ---- writes ---------------------------------------------------------------------

    def create_ledger(self, topic: str) -> int:
        return self.store.create_ledger(topic, ROLE_COMPACTED).ledger_id

    def append(self, ledger_id: int, entries: Sequence[NewEntry]) -> None:
        if not entries:
            return
        first = entries[0][0]
        if entries[-1][0] != first + len(entries) - 1:
            raise StorageError(f"ledger {ledger_id}: positions {first}.. do not follow on")
        data = compacted_batch(ledger_id, [d for _p, d, _k, _f in entries], live_only(entries))
        digests = packed_digests(data, f"ledger {ledger_id} entry {first}")
        self.store.append_compacted(ledger_id, first, len(entries), data, digests)

    def append_records(
        self,
        ledger_id: int,
        position: int,
        records: bytes,
        count: int,
        first_id: MessageId,
        last_id: MessageId,
        live_only: bool,
    ) -> None:
        data = compacted_records_batch(records, count, first_id, last_id, live_only)
        digests = key_digests(records, f"ledger {ledger_id} entry {position}")
        self.store.append_compacted(ledger_id, position, count, data, digests)

    def seal(self, ledger_id: int) -> None:
        self.store.seal_ledger(ledger_id)

    def delete_ledger(self, ledger_id: int) -> None:
        self.store.delete_ledger(ledger_id)

    def commit(
        self,
        topic: str,
        ledger_id: int,
        horizon: MessageId,
        expected_previous: int | None,
        incarnation: int = 0,
    ) -> None:
        """The commit every engine's run ends in (outside runs too). Besides the base the
        run began from, it checks that the run and its ledger belong to this topic and not
        to a deleted one of the same name: the incarnation the run began with, and, for
        runs that cannot say (``incarnation`` 0), that the new ledger and the horizon were
        made after this topic was (the incarnation is the ledger id sequence's position
        at the topic's creation)."""
        t = self.store.topic(topic)
        with t.lock:
            if t.deleted:
                raise TopicNotFound(f"topic {topic!r} was deleted during compaction", topic=topic)
            meta = self.store.ledger(ledger_id)
            if (
                (incarnation and incarnation != t.incarnation)
                or meta is None
                or meta.topic != topic
                or ledger_id < t.incarnation
                or horizon.ledger_id < t.incarnation
            ):
                raise TopicNotFound(
                    f"topic {topic!r} was deleted during compaction (the topic of that name "
                    "now is another one): nothing of the run is committed",
                    topic=topic,
                )
            current = t.compacted_ledger_id()
            if current != expected_previous:
                raise CommitConflict(
                    f"compacted ledger of {topic!r} is {current}, expected {expected_previous}: "
                    "another compaction committed first",
                    topic=topic,
                )
            cursor = t.cursors.get(COMPACTION_SUBSCRIPTION)
            properties = dict(cursor.properties) if cursor is not None else {}
            properties[COMPACTED_LEDGER_PROPERTY] = str(ledger_id)
            self.store.commit_cursor(topic, COMPACTION_SUBSCRIPTION, horizon, properties)
