"""What the TwoPhaseCompactor needs from storage, as small ``Protocol`` interfaces.

The compactor never sees RocksDB, the ledger store or gRPC: it reads the topic through
the ``__compaction`` subscription as a list of *segments* fixed at the start of the run
(the previous compacted ledger, then the raw entries after its horizon up to the last
confirmed id), writes a new ledger, and commits ``(ledger, horizon)``. The in-process
adapter (``ledger_adapter``) serves the server's runs; the in-memory twin (``memory``)
serves fast tests; a gRPC adapter can serve runs driven from outside (the Spark engine).

Entry bytes are ``compactlog.v1.Message`` wire bytes with the ``id`` field (the
original id), in raw and compacted ledgers alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol, runtime_checkable

from compactlog.storage.types import MessageId


class Segment(NamedTuple):
    """A contiguous run ``first_entry..last_entry`` (inclusive) of one ledger."""

    ledger_id: int
    first_entry: int
    last_entry: int
    compacted: bool  # entries of the previous compacted ledger (positions, not ids)

    @property
    def length(self) -> int:
        return self.last_entry - self.first_entry + 1


@dataclass(frozen=True)
class TombstoneRetention:
    """Which tombstones a run keeps in its compacted ledger (reader-aware retention).

    A tombstone that is the latest message of its key stays while a durable subscription
    reading compacted has not passed it (its mark-delete position is before the
    tombstone), so a slow reader never misses a deletion; or while it is younger than the
    topic's ``delete.retention.ms`` by publish time, for readers without a subscription.
    The server fixes both bounds when the run begins; they travel with the input to the
    worker. Without a ``TombstoneRetention`` a run drops every tombstone.
    """

    readers_at: MessageId | None  # lowest such mark-delete (None: no such subscription)
    published_after_ms: int | None  # now - delete.retention.ms (None: the setting is 0)

    def keeps(self, msg_id: MessageId, publish_time_ms: int) -> bool:
        if self.readers_at is not None and msg_id > self.readers_at:
            return True
        return self.published_after_ms is not None and publish_time_ms > self.published_after_ms

    @staticmethod
    def of(
        readers_at: MessageId | None,
        delete_retention_ms: int,
        now_ms: int,
        horizon: MessageId | None,
    ) -> TombstoneRetention | None:
        """The retention of a run ending at ``horizon``; None when it keeps nothing."""
        if readers_at is not None and horizon is not None and readers_at >= horizon:
            readers_at = None  # every such subscription passed the whole input
        if readers_at is None and delete_retention_ms <= 0:
            return None
        after = now_ms - delete_retention_ms if delete_retention_ms > 0 else None
        return TombstoneRetention(readers_at, after)


@dataclass(frozen=True)
class CompactionInput:
    """The snapshot a run works on; later publishes wait for the next run."""

    topic: str
    previous_ledger: int | None  # current compacted ledger, None before the first run
    previous_horizon: MessageId | None  # last raw id it covers
    horizon: MessageId | None  # last confirmed id at the start of the run (new horizon)
    segments: tuple[Segment, ...]  # previous compacted ledger first, then the raw tail
    retain_null_key: bool
    # Which topic of this name the snapshot is of (deleted and created again, a name
    # means another topic); 0 = not known to this storage, not checked.
    incarnation: int = 0
    tombstones: TombstoneRetention | None = None  # None: every tombstone goes

    @property
    def nothing_to_do(self) -> bool:
        """No raw entry after the previous horizon: a run would rewrite the same view."""
        return self.horizon is None or self.horizon == self.previous_horizon

    @property
    def entries(self) -> int:
        return sum(seg.length for seg in self.segments)

    def cut(self, covered: int) -> CompactionInput:
        """The input's first ``covered`` entries, for a run whose phase one stopped there
        (its offset map was full); the horizon becomes the last covered raw id, so the
        next run starts after it. ``covered`` must reach past the compacted ledger."""
        kept: list[Segment] = []
        left = covered
        for seg in self.segments:
            if left <= 0:
                break
            if seg.length > left:
                seg = seg._replace(last_entry=seg.first_entry + left - 1)
            kept.append(seg)
            left -= seg.length
        last = kept[-1] if kept else None
        if last is None or last.compacted:
            raise ValueError(f"a cut at {covered} covers no raw entry of {self.topic!r}")
        horizon = MessageId(last.ledger_id, last.last_entry)
        return replace(self, horizon=horizon, segments=tuple(kept))


def tail_segments(
    ledgers: Sequence[tuple[int, int]], after: MessageId | None, stop: MessageId
) -> list[Segment]:
    """Raw segments with after < id <= stop, from (ledger id, entries) pairs."""
    out = []
    for lid, entries in ledgers:
        if not entries or lid > stop.ledger_id or (after is not None and lid < after.ledger_id):
            continue
        first = after.entry_id + 1 if after is not None and lid == after.ledger_id else 0
        last = min(entries - 1, stop.entry_id) if lid == stop.ledger_id else entries - 1
        if first <= last:
            out.append(Segment(lid, first, last, False))
    return out


# (entry id, flags, entry size in bytes, key) — flags as in ``storage.codec``
KeyEntry = tuple[int, int, int, bytes | None]
# (entry id, entry bytes, key, flags) — what a compacted ledger is appended
NewEntry = tuple[int, bytes, bytes | None, int]


class CompactionReads(Protocol):
    """The reads both phases make: what a run, a preview and a past view (``as_of``) share."""

    def read_keys(self, segment: Segment, reverse: bool = False) -> Iterator[KeyEntry]:
        """Keys, flags and sizes of a segment's entries without reading payloads."""
        ...

    def read_entries(
        self, segment: Segment, select: bytearray | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """``(entry id, bytes)`` in id order; with ``select`` only the entries whose bit
        (``entry - first_entry``, little-endian within each byte) is set. DataLoss when a
        selected entry is missing."""
        ...


class CompactionStorage(CompactionReads, Protocol):
    """Read a topic through ``__compaction`` up to a snapshot; write and commit a ledger."""

    def begin(self, topic: str) -> CompactionInput:
        """Snapshot the input; create the ``__compaction`` cursor at the earliest id if
        missing (so retention keeps what the compactor needs). DataLoss when the current
        compacted ledger is gone."""
        ...

    def create_ledger(self, topic: str) -> int: ...

    def append(self, ledger_id: int, entries: Sequence[NewEntry]) -> None: ...

    def seal(self, ledger_id: int) -> None: ...

    def delete_ledger(self, ledger_id: int) -> None: ...

    def commit(
        self,
        topic: str,
        ledger_id: int,
        horizon: MessageId,
        expected_previous: int | None,
        incarnation: int = 0,
    ) -> None:
        """One atomic write of the cursor's mark-delete position (the horizon) and its
        ``CompactedTopicLedger`` property. CommitConflict when the current compacted
        ledger is no longer ``expected_previous`` (another run won); TopicNotFound when
        the topic was deleted, also when a new topic of that name exists now (its
        ``incarnation`` is not the run's)."""
        ...


# (position of the payload's first record, checked batch payload, where it was read)
StoredPayload = tuple[int, memoryview, str]


@runtime_checkable
class BatchReads(Protocol):
    """What a storage of stored batches adds to its reads, so that phase one and phase
    two's selection run one call per batch (``log_cleaner.batch_scan``) instead of one
    loop step per record: the ledger reads (a run's, in the server or in a worker, and a
    past view's) have it; the in-memory twin and the gRPC adapter do not, and are read
    entry by entry."""

    def stored_batches(self, segment: Segment) -> Iterator[StoredPayload]:
        """The checked batch payloads holding the segment's entries, in order; DataLoss
        when an entry is missing (as ``read_keys``)."""
        ...


@runtime_checkable
class BatchStorage(BatchReads, Protocol):
    """A run's storage that also appends records as they are framed: phase two copies
    each stored batch's winners in one call (``phase_two.WinnerCopier``)."""

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
        """Append ``count`` payload records (``Message`` bytes with their original ids,
        each framed as a batch payload frames it) as one COMPACTED batch at ``position``;
        the same bytes ``append`` makes of the same messages (``live_only``: the caller
        knows each is keyed with a non-empty value, ``LIVE_ONLY``)."""
        ...
