"""``compactlog migrate DATA_DIR``: convert a format-1 data dir to format 2, in place.

LEDGER store (``DATA_DIR/ledgers``). Format 1 kept one RocksDB entry per message::

    b"E" ledger:u64 entry:u64        -> protobuf ``Message`` wire bytes; no ``id`` field in a
                                        raw ledger, the original id in a compacted ledger
                                        (where ``entry`` is the position in that ledger)
    b"K" ledger:u64 first_entry:u64  -> key block: per entry of one appended run
                                        flags:u8 size:u32 klen:u32 key:klen

A raw ledger's key blocks are its publishes (one block per publish run within a ledger,
all of one publish time); a compacted ledger's are the compactor's appends. Format 2
(``storage/keys.py``, ``storage/batch.py``) stores batches under ``E`` and has no ``K``
range. Each key block becomes one batch (or several: a batch is capped at about 1 MiB
and 1000 messages, and a run is split where its publish time changes): raw messages get
their id field in front, compacted ones already carry theirs.

Every old entry is read back whole: strictly parsed (fields 1..6 in order, each of the
wire type the writer used, UTF-8 properties), checked against its key block (size, key,
flags), ids contiguous in raw ledgers and ascending in compacted ones, and the ledger's
entry count against its meta. Anything else stops the migration with ``CorruptData``
naming the topic, ledger and entry; nothing is ever dropped.

Crash safety: one atomic WriteBatch per ledger deletes its ``E`` and ``K`` ranges and
puts its batches and its meta (``bytes`` = the new stored size). A ledger with no ``K``
key left is converted already, so a run stopped anywhere (a crash, a corrupt entry) is
finished by running again. The format key becomes ``2`` last, in a synced write (which
makes the earlier, unsynced ledger writes durable too: the WAL is one sequence); until
then the server refuses the store. The segments directory (``DATA_DIR/segments``) is
converted after that by ``storage.segmented.migrate``, crash-safe on its own terms.

The data dir's server lock (``LOCK.server``, the same ``flock`` the server takes) is held
throughout, so no server can start on a half-converted dir, and none may be running.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from compactlog.errors import StorageError, StoreLocked
from compactlog.storage import keys
from compactlog.storage.codec import ROLE_COMPACTED, ROLE_RAW, LedgerMeta
from compactlog.storage.legacy_ledgers import (
    ENTRY_KEY,
    LEDGER_KEY,
    LedgerConverter,
    closing,
    key_block_range,
)
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.segmented.migrate import migrate_segments
from compactlog.storage.segmented.version import CURRENT as SEGMENTS_CURRENT
from compactlog.storage.segmented.version import holds_topics, read_format

SERVER_LOCK = "LOCK.server"  # the file server/app.py's lock_data_dir flocks
LEDGERS_DIR = "ledgers"
SEGMENTS_DIR = "segments"


_U64 = 1 << 64


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What one run did. Counts cover this run only (a re-run after a crash counts what
    was left)."""

    ledger_format_before: str | None  # "1", "2", or None: no ledger store (or an empty one)
    ledgers_converted: int = 0
    ledgers_already_converted: int = 0  # no key blocks left: an earlier run's, or empty
    entries: int = 0  # messages converted
    batches: int = 0  # batches written
    bytes_before: int = 0  # stored bytes of the converted ledgers, format 1 (their metas)
    bytes_after: int = 0  # the same ledgers as batches
    orphan_ledgers_removed: int = 0  # format-1 ranges of ledgers that had no meta
    segments_migrated: bool = False  # the segments directory needed (and got) a migration
    segments_converted: int = 0  # segment files rewritten

    @property
    def already_current(self) -> bool:
        """Nothing needed doing: the data dir was in format 2 already."""
        return self.ledger_format_before != "1" and not self.segments_migrated


# ---- holding the data dir -----------------------------------------------------------


@contextlib.contextmanager
def hold_data_dir(data_dir: Path) -> Iterator[None]:
    """The server's lock on ``data_dir`` (``StoreLocked`` while a server holds it), held
    for the duration so that no server starts on a dir being converted."""
    if not data_dir.is_dir():
        raise StorageError(f"data dir {data_dir} does not exist")
    handle = open(data_dir / SERVER_LOCK, "a+")  # noqa: SIM115 - held for the block
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            raise StoreLocked(
                f"data dir {data_dir} is in use by a compactlog server ({owner}); "
                "stop it before migrating"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} (compactlog migrate)")
        handle.flush()
        yield
    finally:
        handle.close()


def _has_key_blocks(db: RocksDB, ledger_id: int) -> bool:
    return db.last_key(*key_block_range(ledger_id)) is not None


def _ledger_written(ledger_id: int) -> None:
    """Called after each ledger's write (tests raise here to simulate a crash)."""


# ---- the ledger store ---------------------------------------------------------------


@dataclass(slots=True)
class _LedgerTotals:
    fmt: str | None = None
    converted: int = 0
    already: int = 0
    entries: int = 0
    batches: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    orphans: int = 0


def _orphan_ledgers(db: RocksDB) -> list[int]:
    """Ledgers with key blocks left after every ledger with a meta was converted."""
    found: list[int] = []
    prefix = keys.LEGACY_KEY_BLOCK_PREFIX
    end = bytes([prefix[0] + 1])
    while (key := db.last_key(prefix, end)) is not None:
        lid = int(ENTRY_KEY.unpack(key)[1])
        found.append(lid)
        end = LEDGER_KEY.pack(prefix, lid)
    return sorted(found)


def _migrate_ledgers(path: Path, log: Callable[[str], None]) -> _LedgerTotals:
    totals = _LedgerTotals()
    if not path.is_dir():
        log(f"{path}: no ledger store")
        return totals
    db = RocksDB(path)
    try:
        if not _needs_conversion(db, path, totals, log):
            return totals
        with closing(db.scan(*keys.ledger_meta_range())) as scan:
            metas = [LedgerMeta.decode(keys.ledger_id_of_meta_key(k), v) for k, v in scan]
        log(f"{path}: converting {len(metas)} ledger(s) from format 1 to format 2")
        for meta in metas:
            _convert_ledger(db, path, meta, totals, log)
        _finish_format_2(db, totals, log)
        log(
            f"{path}: format 2: {totals.converted} ledger(s), {totals.entries} entries in "
            f"{totals.batches} batch(es) ({totals.bytes_before} -> {totals.bytes_after} bytes)"
            + (f"; {totals.already} converted by an earlier run or empty" if totals.already else "")
        )
        db.compact_range(b"E", b"L")  # reclaim the old entries' space now
        return totals
    finally:
        db.close()


def _needs_conversion(
    db: RocksDB, path: Path, totals: _LedgerTotals, log: Callable[[str], None]
) -> bool:
    """Whether the store is in format 1 (to convert); says why not, or refuses a format
    it has no migration from."""
    fmt = db.get(keys.FORMAT_KEY)
    if fmt is None:
        if db.last_key(*keys.ledger_meta_range()) is not None:
            raise StorageError(f"{path} holds ledgers but no format key")
        log(f"{path}: empty ledger store, nothing to convert")
        return False
    totals.fmt = fmt.decode(errors="replace")
    if fmt == keys.FORMAT_VERSION:
        log(f"{path}: ledgers already in format {totals.fmt}")
        return False
    if fmt != keys.LEGACY_FORMAT_VERSION:
        raise StorageError(
            f"{path}: ledger format {totals.fmt!r} has no migration to format "
            f"{keys.FORMAT_VERSION.decode()}"
        )
    return True


def _convert_ledger(
    db: RocksDB, path: Path, meta: LedgerMeta, totals: _LedgerTotals, log: Callable[[str], None]
) -> None:
    """One ledger to format 2 in one write (a ledger converted by an earlier, interrupted
    run has no key blocks left and is counted as such)."""
    if meta.role not in (ROLE_RAW, ROLE_COMPACTED):
        raise StorageError(f"{path}: ledger {meta.ledger_id} has unknown role {meta.role}")
    if not _has_key_blocks(db, meta.ledger_id):
        totals.already += 1
        return
    done = LedgerConverter(db, meta).run()
    db.write(done.batch)
    _ledger_written(meta.ledger_id)
    totals.converted += 1
    totals.entries += done.entries
    totals.batches += done.batches
    totals.bytes_before += meta.bytes
    totals.bytes_after += done.meta.bytes
    kind = "compacted" if meta.role == ROLE_COMPACTED else "raw"
    log(
        f"  ledger {meta.ledger_id} ({kind}, topic {meta.topic!r}): "
        f"{done.entries} entries -> {done.batches} batch(es), "
        f"{meta.bytes} -> {done.meta.bytes} bytes"
    )


def _finish_format_2(db: RocksDB, totals: _LedgerTotals, log: Callable[[str], None]) -> None:
    """Remove format-1 leftovers of ledgers without a meta, then say format 2 (synced)."""
    final = Batch()
    orphans = _orphan_ledgers(db)
    for lid in orphans:
        # Format-1 leftovers of a ledger without a meta: nothing reads them.
        final.delete_range(*keys.ledger_range(lid))
        final.delete_range(*key_block_range(lid))
        log(f"  ledger {lid}: no meta, its format-1 entries removed")
    totals.orphans = len(orphans)
    final.put(keys.FORMAT_KEY, keys.FORMAT_VERSION)
    db.write(final, sync=True)


# ---- the data dir -------------------------------------------------------------------


def migrate_data_dir(data_dir: Path, log: Callable[[str], None] = print) -> MigrationReport:
    """Convert ``data_dir`` (ledgers, then segments) from format 1 to format 2 in place.

    Raises ``StoreLocked`` while a server holds the dir, ``CorruptData`` (naming topic,
    ledger and entry) for an old entry that cannot be read back whole, ``StorageError``
    for a format this has no migration from. Any of them leaves a dir that a re-run
    finishes; a dir in format 2 already is left alone.
    """
    with hold_data_dir(data_dir):
        ledgers = _migrate_ledgers(data_dir / LEDGERS_DIR, log)
        segments_root = data_dir / SEGMENTS_DIR
        segments_migrated = False
        converted = 0
        if not segments_root.is_dir():
            log(f"{segments_root}: no segments directory")
        elif read_format(segments_root) == SEGMENTS_CURRENT:
            log(f"{segments_root}: segments already in format {SEGMENTS_CURRENT}")
        elif read_format(segments_root) is None and not holds_topics(segments_root):
            log(f"{segments_root}: no segmented topics, nothing to convert")
        else:
            converted = migrate_segments(segments_root)
            segments_migrated = True
            log(f"{segments_root}: {converted} segment file(s) converted to format 2")
        report = MigrationReport(
            ledger_format_before=ledgers.fmt,
            ledgers_converted=ledgers.converted,
            ledgers_already_converted=ledgers.already,
            entries=ledgers.entries,
            batches=ledgers.batches,
            bytes_before=ledgers.bytes_before,
            bytes_after=ledgers.bytes_after,
            orphan_ledgers_removed=ledgers.orphans,
            segments_migrated=segments_migrated,
            segments_converted=converted,
        )
        if report.already_current:
            log(f"{data_dir}: already in format 2, nothing to do")
        else:
            log(f"{data_dir}: migrated to format 2")
        return report


__all__ = ["MigrationReport", "hold_data_dir", "migrate_data_dir"]
