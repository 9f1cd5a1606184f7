"""``compactlog check DATA_DIR``: an offline verifier of everything the server stored.

Kafka's ``kafka-dump-log --deep-iteration`` idea, for a whole data dir: every batch of
every ledger and segment is read and passes ``batch.check`` (length, magic, CRC-32C) and
``batch.walk`` (its message records); ids must tile each ledger and ascend through each
segment; every index entry must point at the batch it names; every state file (topic
records and configs, cursors, compaction status, log start offsets, recovery points, the
cleaner checkpoint, ``FORMAT``) must pass its checksum and strict parse. Nothing is
written. Each problem is reported with where it is; the exit status says whether there
were any. Leftovers the server handles itself (``.swap``, ``.cleaned``, ``.deleted``,
set-aside ``*.bad-*`` files and keys) are reported as notes, not problems.

The data dir's server lock is held throughout (``migrate.hold_data_dir``), so the
check refuses to run while a server holds the dir and no server starts during it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from compactlog.errors import CompactlogError, CorruptData, StoreLocked
from compactlog.storage import batch as codec
from compactlog.storage import keys, partitioned_topics
from compactlog.storage.codec import ROLE_RAW, LedgerMeta
from compactlog.storage.compacted_digests import (
    batch_crc,
    check_ledger_digests,
    check_stray_digests,
)
from compactlog.storage.cursor import Cursor
from compactlog.storage.key_index import block_entries, block_of, entries_of
from compactlog.storage.key_index_check import check_ledger_index, check_stray_indexes
from compactlog.storage.ledger_catalog import LedgerCatalog, catalog_path
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.migrate import LEDGERS_DIR, SEGMENTS_DIR, hold_data_dir
from compactlog.storage.rocks import RocksDB


@dataclass
class CheckReport:
    """What a check found: problems (exit != 0), notes, and how much it read."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def problem(self, where: str, what: str) -> None:
        self.problems.append(f"{where}: {what}")

    def note(self, where: str, what: str) -> None:
        self.notes.append(f"{where}: {what}")

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def merge_counts(self, other: CheckReport) -> None:
        for what, n in other.counts.items():
            self.count(what, n)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        read = ", ".join(f"{n} {what}" for what, n in sorted(self.counts.items()))
        verdict = "no problems" if self.ok else f"{len(self.problems)} problem(s)"
        return f"checked {read or 'nothing'}: {verdict}"


def check_data_dir(data_dir: Path) -> CheckReport:
    """Check a whole data dir (refused with ``StoreLocked`` while a server holds it)."""
    from compactlog.storage.segmented.check import check_segments

    report = CheckReport()
    try:
        with hold_data_dir(data_dir):
            ledgers = data_dir / LEDGERS_DIR
            if ledgers.exists():
                check_ledger_store(ledgers, report)
            segments = data_dir / SEGMENTS_DIR
            if segments.exists():
                check_segments(segments, report)
            _check_partition_counts(data_dir, report)
    except StoreLocked:
        raise StoreLocked(
            f"data dir {data_dir} is in use by a compactlog server; stop it before checking"
        ) from None
    return report


def _check_partition_counts(data_dir: Path, report: CheckReport) -> None:
    """``partitioned-topics.json`` (``storage.partitioned_topics``): checksum and parse."""
    path = data_dir / partitioned_topics.FILE_NAME
    try:
        found, pending = partitioned_topics.read(path)
    except CorruptData as exc:
        report.problem(str(path), str(exc))
        return
    report.count("partitioned topics", len(found))
    for change in pending.values():
        report.note(
            f"{path} {change.name!r}",
            f"a partition {change.op.value} to {change.partitions} partitions cut short "
            "(the server finishes it at start)",
        )


# ---- the ledger store -----------------------------------------------------------------


def check_ledger_store(path: Path, report: CheckReport) -> None:
    where = str(path)
    try:
        db = RocksDB(path, read_only=True)
    except CompactlogError as exc:
        report.problem(where, f"cannot be opened: {exc}")
        return
    if db.torn_tail is not None:
        report.note(where, db.torn_tail.describe(dropped=False))
    try:
        _check_store(db, report)
        _check_catalog(path, db, report)
    except CorruptData as exc:
        report.problem(where, str(exc))
    finally:
        db.close()


def _check_catalog(path: Path, db: RocksDB, report: CheckReport) -> None:
    """Topics, ledgers and entries the catalog lists and the store lost (a MANIFEST, a
    WAL or an SST gone)."""
    try:
        catalog = LedgerCatalog(path)
    except CompactlogError as exc:
        report.problem(str(catalog_path(path)), str(exc))
        return
    for what in catalog.lost(db):
        report.problem(
            what, "listed in the catalog, gone from the store (MANIFEST, WAL or SST lost)"
        )


def _check_store(db: RocksDB, report: CheckReport) -> None:
    fmt = db.get(keys.FORMAT_KEY)
    if fmt not in (None, keys.FORMAT_VERSION):
        report.problem("format key", f"format {fmt!r}, not {keys.FORMAT_VERSION!r}")
        return
    metas = _metas(db, report)
    listed = _topics(db, metas, report)
    _cursors_and_status(db, listed, report)
    for key, _value in db.scan(b"B", b"C"):
        report.note(f"set-aside key {key[:60]!r}", "a value the server refused and kept")
    indexed = db.get(keys.KEY_INDEX_KEY) == keys.KEY_INDEX_VERSION
    if not indexed and metas:
        report.note("key index", "not built yet (the server builds it at its next start)")
    for _lid, meta in sorted(metas.items()):
        batches: dict[int, tuple[int, int]] = {}
        expected = _check_ledger(db, meta, report, batches)
        if indexed:
            check_ledger_index(db, meta, expected, report)
        check_ledger_digests(db, meta, None if expected is None else batches, report)
    _stray_entries(db, metas, report)
    check_stray_indexes(db, metas, report)
    check_stray_digests(db, metas, report)


def _metas(db: RocksDB, report: CheckReport) -> dict[int, LedgerMeta]:
    metas: dict[int, LedgerMeta] = {}
    for key, value in db.scan(*keys.ledger_meta_range()):
        lid = keys.ledger_id_of_meta_key(key)
        try:
            metas[lid] = LedgerMeta.decode(lid, value)
        except Exception as exc:
            report.problem(f"ledger {lid} meta", f"malformed ({exc})")
    return metas


def _topics(db: RocksDB, metas: dict[int, LedgerMeta], report: CheckReport) -> set[str]:
    names: set[str] = set()
    for key, value in db.scan(*keys.topic_range()):
        name = key[1:].decode(errors="replace")
        names.add(name)
        report.count("LEDGER topics")
        try:
            _overrides, lids, _incarnation = LedgerTopic.parse_record(value)
        except Exception as exc:
            report.problem(f"topic {name!r} record", f"malformed ({exc})")
            continue
        for lid in lids:
            meta = metas.get(lid)
            if meta is None:
                report.problem(f"topic {name!r}", f"lists ledger {lid}, which has no meta")
            elif meta.topic != name or meta.role != ROLE_RAW:
                report.problem(f"topic {name!r}", f"lists ledger {lid} of {meta.topic!r}")
    return names


def _cursors_and_status(db: RocksDB, topics: set[str], report: CheckReport) -> None:
    for key, value in db.scan(b"C", b"D"):
        topic, _sep, sub = key[1:].partition(b"\x00")
        where = f"cursor {sub.decode(errors='replace')!r} of {topic.decode(errors='replace')!r}"
        report.count("cursors")
        try:
            Cursor.from_head(sub.decode(), json.loads(value))
        except Exception as exc:
            report.problem(where, f"malformed ({exc})")
        if topic.decode(errors="replace") not in topics:
            report.note(where, "its topic does not exist (the server deletes it at start)")
    for key, value in db.scan(*keys.ack_ranges_all()):
        report.count("ack ranges")
        try:
            _topic, _sub, start, end = keys.parse_ack_range(key, value)
            if start[0] != end[0] or start > end:
                raise ValueError(f"{start} > {end}")
        except Exception as exc:
            report.problem(f"ack range {key[:80]!r}", f"malformed ({exc})")
    for key, value in db.scan(b"S", b"T"):
        try:
            if not isinstance(json.loads(value), dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            report.problem(f"compaction status of {key[1:]!r}", f"malformed ({exc})")


def _check_ledger(
    db: RocksDB, meta: LedgerMeta, report: CheckReport, batches: dict[int, tuple[int, int]]
) -> list[tuple[int, int]] | None:
    """Check a ledger's batches; the key index entries they call for (None: unreadable).
    ``batches`` gets each batch's position -> (crc field, count), for its key digests."""
    lid = meta.ledger_id
    where = f"topic {meta.topic!r} ledger {lid}"
    expected, last_id = 0, None
    index: list[bytes] = []
    report.count("ledgers")
    try:
        for key, data in db.scan(*keys.ledger_range(lid)):
            at = keys.entry_ids(key)[1]
            report.count("ledger batches")
            header = codec.check(data, f"{where} entry {at}")
            walked = codec.walk(codec.payload_of(data, header), f"{where} entry {at}")
            if at != expected:
                report.problem(f"{where} entry {expected}", f"batch missing (next at {at})")
            if len(walked) != header.count:
                report.problem(f"{where} entry {at}", "record count differs from the header")
            ids = [(w[0], w[1]) for w in walked]
            raw = meta.role == ROLE_RAW
            if raw and ids != [(lid, at + i) for i in range(len(ids))]:
                report.problem(f"{where} entry {at}", "message ids do not follow the entries")
            if not raw and (ids != sorted(set(ids)) or (last_id and ids and ids[0] <= last_id)):
                report.problem(f"{where} entry {at}", "compacted ids do not ascend")
            last_id = ids[-1] if ids else last_id
            batches[at] = (batch_crc(data), header.count)
            expected = at + header.count
            index.append(block_entries(block_of(walked), at) if raw else b"")
    except CorruptData as exc:
        report.problem(where, str(exc))
        return None
    if expected != meta.entries:
        report.problem(where, f"holds {expected} entries, its meta says {meta.entries}")
    return sorted(entries_of(b"".join(index)))


def _stray_entries(db: RocksDB, metas: dict[int, LedgerMeta], report: CheckReport) -> None:
    """Entries of ledgers that have no meta (nothing can reach them)."""
    seen: set[int] = set()
    begin = b"E"
    while True:
        key = next(iter(db.scan_keys(begin, b"F")), None)
        if key is None:
            return
        lid = keys.entry_ids(key)[0]
        if lid not in metas and lid not in seen:
            seen.add(lid)
            report.problem(f"ledger {lid}", "entries stored without a ledger meta")
        begin = keys.ledger_range(lid)[1]


Reporter = Callable[[str], None]


def print_report(report: CheckReport, out: Reporter) -> None:
    for line in report.problems:
        out(f"PROBLEM {line}")
    for line in report.notes:
        out(f"note    {line}")
    out(report.summary())
