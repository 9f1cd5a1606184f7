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
import struct
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from compactlog.errors import CorruptData, StorageError, StoreLocked
from compactlog.storage import batch as codec
from compactlog.storage import keys
from compactlog.storage.codec import ROLE_COMPACTED, ROLE_RAW, LedgerMeta
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.segmented.migrate import migrate_segments
from compactlog.storage.segmented.version import CURRENT as SEGMENTS_CURRENT
from compactlog.storage.segmented.version import holds_topics, read_format
from compactlog.storage.types import MessageId

SERVER_LOCK = "LOCK.server"  # the file server/app.py's lock_data_dir flocks
LEDGERS_DIR = "ledgers"
SEGMENTS_DIR = "segments"

MAX_BATCH_BYTES = 1024 * 1024
MAX_BATCH_MESSAGES = 1000

_ENTRY = struct.Struct(">cQQ")
_LEDGER = struct.Struct(">cQ")
_KEY_HEAD = struct.Struct(">BII")
_U64 = 1 << 64
_RECORD_OVERHEAD = 6  # a record's tag and length, at most, for the batch size cap


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


# ---- reading format-1 entries -------------------------------------------------------


class _Bad(Exception):
    """Bytes that are not what the format-1 writer wrote."""


def _varint(buf: bytes, p: int, end: int) -> tuple[int, int]:
    try:
        return codec.read_varint(buf, p, end)
    except codec.MalformedPayload as exc:
        raise _Bad(str(exc)) from None


def _signed(n: int) -> int:
    return n - _U64 if n >= 1 << 63 else n


def _length_delimited(buf: bytes, p: int, end: int, what: str) -> tuple[int, int]:
    n, p = _varint(buf, p, end)
    if p + n > end:
        raise _Bad(f"{what} runs past its message")
    return p, p + n


def _parse_id(buf: bytes, p: int, end: int) -> MessageId:
    ledger_id = entry_id = 0
    last = 0
    while p < end:
        tag, p = _varint(buf, p, end)
        if tag not in (0x08, 0x10) or tag >> 3 <= last:
            raise _Bad(f"unexpected tag {tag:#x} in the message id")
        last = tag >> 3
        value, p = _varint(buf, p, end)
        if tag == 0x08:
            ledger_id = value
        else:
            entry_id = value
    return MessageId(ledger_id, entry_id)


def _check_property(buf: bytes, p: int, end: int) -> None:
    last = 0
    while p < end:
        tag, p = _varint(buf, p, end)
        if tag not in (0x0A, 0x12) or tag >> 3 <= last:
            raise _Bad(f"unexpected tag {tag:#x} in a property")
        last = tag >> 3
        s, p = _length_delimited(buf, p, end, "a property")
        try:
            buf[s:p].decode()
        except UnicodeDecodeError:
            raise _Bad("a property is not UTF-8") from None


# Message fields: number -> wire type (1 id, 2 key, 3 value, 4 property, 5 publish, 6 event)
_WIRE = {1: 2, 2: 2, 3: 2, 4: 2, 5: 0, 6: 0}


@dataclass(frozen=True, slots=True)
class _Legacy:
    ident: MessageId | None
    key: bytes | None
    flags: int
    publish_ms: int
    event_ms: int


def _parse_entry(data: bytes) -> _Legacy:
    """A format-1 entry parsed strictly: what the old writer (protobuf ``Message``
    serialisation) produces, fields in number order, or ``_Bad``."""
    ident: MessageId | None = None
    key: bytes | None = None
    flags = publish = event = 0
    last = 0
    p, end = 0, len(data)
    while p < end:
        tag, p = _varint(data, p, end)
        number, wire = tag >> 3, tag & 7
        if _WIRE.get(number) != wire:
            raise _Bad(f"unexpected field {number} (wire type {wire})")
        if number < last or (number == last and number != 4):
            raise _Bad(f"field {number} out of order or repeated")
        last = number
        if wire == 0:
            value, p = _varint(data, p, end)
            if number == 5:
                publish = _signed(value)
            else:
                event = _signed(value)
            continue
        s, p = _length_delimited(data, p, end, f"field {number}")
        if number == 1:
            ident = _parse_id(data, s, p)
        elif number == 2:
            key = data[s:p]
        elif number == 3:
            flags = codec.VALUE_PRESENT | (codec.VALUE_NON_EMPTY if p > s else 0)
        else:
            _check_property(data, s, p)
    if key is not None:
        flags |= codec.HAS_KEY
    return _Legacy(ident, key, flags, publish, event)


def _key_block(block: bytes) -> Iterator[tuple[int, int, bytes | None]]:
    """``(flags, size, key)`` per entry of a format-1 key block, or ``_Bad``."""
    p, end = 0, len(block)
    if not end:
        raise _Bad("empty key block")
    while p < end:
        if end - p < _KEY_HEAD.size:
            raise _Bad("key block is torn")
        flags, size, klen = _KEY_HEAD.unpack_from(block, p)
        p += _KEY_HEAD.size
        if p + klen > end or (klen and not flags & codec.HAS_KEY):
            raise _Bad("key block is torn")
        yield flags, size, (block[p : p + klen] if flags & codec.HAS_KEY else None)
        p += klen


# ---- converting one ledger ----------------------------------------------------------


def _key_block_range(ledger_id: int) -> tuple[bytes, bytes]:
    return (
        _ENTRY.pack(keys.LEGACY_KEY_BLOCK_PREFIX, ledger_id, 0),
        _LEDGER.pack(keys.LEGACY_KEY_BLOCK_PREFIX, ledger_id + 1)
        if ledger_id < keys.MAX_ID
        else b"L",
    )


def _has_key_blocks(db: RocksDB, ledger_id: int) -> bool:
    return db.last_key(*_key_block_range(ledger_id)) is not None


_T = TypeVar("_T")


@contextlib.contextmanager
def _closing(it: Iterator[_T]) -> Iterator[Iterator[_T]]:
    """A scan closed on leaving the block, errors included: a live RocksDB iterator would
    keep the store from closing while a traceback holds the frame."""
    try:
        yield it
    finally:
        if isinstance(it, Generator):
            it.close()


class _Group:
    """Message records of one batch being built."""

    __slots__ = ("at", "bodies", "event", "first", "last", "publish", "size")

    def __init__(self, at: int, ident: MessageId, publish: int) -> None:
        self.at = at  # position of the first message in its ledger: the batch key
        self.first = self.last = ident
        self.publish = publish
        self.event = -(1 << 63)
        self.bodies: list[bytes] = []
        self.size = 0


@dataclass(slots=True)
class _Converted:
    batch: Batch
    meta: LedgerMeta
    entries: int
    batches: int


class _LedgerConverter:
    def __init__(self, db: RocksDB, meta: LedgerMeta) -> None:
        self.db = db
        self.meta = meta
        self.compacted = meta.role == ROLE_COMPACTED
        self.out = Batch()
        self.group: _Group | None = None
        self.stored = 0
        self.batches = 0

    def where(self, entry: int) -> str:
        return f"topic {self.meta.topic!r} ledger {self.meta.ledger_id} entry {entry}"

    def bad(self, entry: int, why: str) -> CorruptData:
        return CorruptData(
            f"{self.where(entry)}: {why}; migration stopped, nothing of this ledger was "
            "converted (restore the entry, or delete the topic with a format-1 server, and "
            "run `compactlog migrate` again)"
        )

    def flush(self) -> None:
        group, self.group = self.group, None
        if group is None:
            return
        lid = self.meta.ledger_id
        payload = codec.frame_messages(group.bodies)
        count = len(group.bodies)
        # The new codec must read back exactly the ids just written.
        walked = codec.walk(payload, self.where(group.at))
        if (
            len(walked) != count
            or (walked[0][0], walked[0][1]) != group.first
            or (walked[-1][0], walked[-1][1]) != group.last
        ):
            raise self.bad(group.at, "its batch does not read back as written")
        if self.compacted:
            data = codec.pack(
                payload, count, group.first, group.last, 0, 0, attributes=codec.COMPACTED
            )
        else:
            data = codec.pack(payload, count, group.first, group.last, group.publish, group.event)
        self.out.put(keys.entry_key(lid, group.at), data)
        self.stored += len(data)
        self.batches += 1

    def add(self, at: int, ident: MessageId, entry: _Legacy, body: bytes) -> None:
        group = self.group
        publish = 0 if self.compacted else entry.publish_ms
        if group is not None and (
            len(group.bodies) >= MAX_BATCH_MESSAGES
            or group.size + len(body) > MAX_BATCH_BYTES
            or publish != group.publish
        ):
            self.flush()
            group = None
        if group is None:
            group = self.group = _Group(at, ident, publish)
        group.bodies.append(body)
        group.size += len(body) + _RECORD_OVERHEAD
        group.last = ident
        group.event = max(group.event, entry.event_ms)

    def entry(self, at: int, data: bytes, flags: int, size: int, key: bytes | None) -> MessageId:
        """Check one old entry against its key block and add it; its id."""
        try:
            parsed = _parse_entry(data)
        except _Bad as exc:
            raise self.bad(at, f"format-1 entry is unreadable ({exc})") from None
        if size != len(data) or flags != parsed.flags or key != parsed.key:
            raise self.bad(at, "entry does not match its key block")
        lid = self.meta.ledger_id
        if self.compacted:
            if parsed.ident is None:
                raise self.bad(at, "compacted entry carries no original id")
            ident, body = parsed.ident, data
        else:
            if parsed.ident is not None:
                raise self.bad(at, "raw entry carries an id field")
            ident = MessageId(lid, at)
            body = codec.id_field(lid, at) + data
        self.add(at, ident, parsed, body)
        return ident

    def run(self) -> _Converted:
        meta, db = self.meta, self.db
        lid = meta.ledger_id
        e_begin, e_end = keys.ledger_range(lid)
        k_begin, k_end = _key_block_range(lid)
        # Applied in order: the old ranges go, then the batches land in the emptied range.
        self.out.delete_range(e_begin, e_end)
        self.out.delete_range(k_begin, k_end)
        expected = 0
        last_compacted: MessageId | None = None
        with (
            _closing(db.scan(e_begin, e_end)) as entries,
            _closing(db.scan(k_begin, k_end)) as blocks,
        ):
            for block_key, block in blocks:
                first = keys.entry_ids(block_key)[1]
                if first != expected:
                    why = "no key block covers it" if first > expected else "key blocks overlap"
                    raise self.bad(expected, why)
                try:
                    parts = list(_key_block(block))
                except _Bad as exc:
                    raise self.bad(first, f"format-1 key block is unreadable ({exc})") from None
                for flags, size, key in parts:
                    item = next(entries, None)
                    if item is None or keys.entry_ids(item[0])[1] != expected:
                        raise self.bad(expected, "entry is missing")
                    ident = self.entry(expected, item[1], flags, size, key)
                    if last_compacted is not None and ident <= last_compacted:
                        raise self.bad(expected, f"original id {ident} does not ascend")
                    if self.compacted:
                        last_compacted = ident
                    expected += 1
                self.flush()  # a key block never shares a batch with the next one
            extra = next(entries, None)
            if extra is not None:
                raise self.bad(keys.entry_ids(extra[0])[1], "entry is outside every key block")
        if expected != meta.entries:
            raise self.bad(expected, f"ledger holds {expected} entries, its meta {meta.entries}")
        new = LedgerMeta(
            ledger_id=lid,
            topic=meta.topic,
            role=meta.role,
            sealed=meta.sealed,
            entries=meta.entries,
            bytes=self.stored,
            first_publish_ms=meta.first_publish_ms,
            last_publish_ms=meta.last_publish_ms,
        )
        self.out.put(keys.ledger_meta_key(lid), new.encode())
        return _Converted(self.out, new, expected, self.batches)


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
        lid = int(_ENTRY.unpack(key)[1])
        found.append(lid)
        end = _LEDGER.pack(prefix, lid)
    return sorted(found)


def _migrate_ledgers(path: Path, log: Callable[[str], None]) -> _LedgerTotals:
    totals = _LedgerTotals()
    if not path.is_dir():
        log(f"{path}: no ledger store")
        return totals
    db = RocksDB(path)
    try:
        fmt = db.get(keys.FORMAT_KEY)
        if fmt is None:
            if db.last_key(*keys.ledger_meta_range()) is not None:
                raise StorageError(f"{path} holds ledgers but no format key")
            log(f"{path}: empty ledger store, nothing to convert")
            return totals
        totals.fmt = fmt.decode(errors="replace")
        if fmt == keys.FORMAT_VERSION:
            log(f"{path}: ledgers already in format {totals.fmt}")
            return totals
        if fmt != keys.LEGACY_FORMAT_VERSION:
            raise StorageError(
                f"{path}: ledger format {totals.fmt!r} has no migration to format "
                f"{keys.FORMAT_VERSION.decode()}"
            )
        with _closing(db.scan(*keys.ledger_meta_range())) as scan:
            metas = [LedgerMeta.decode(keys.ledger_id_of_meta_key(k), v) for k, v in scan]
        log(f"{path}: converting {len(metas)} ledger(s) from format 1 to format 2")
        for meta in metas:
            if meta.role not in (ROLE_RAW, ROLE_COMPACTED):
                raise StorageError(f"{path}: ledger {meta.ledger_id} has unknown role {meta.role}")
            if not _has_key_blocks(db, meta.ledger_id):
                totals.already += 1
                continue
            done = _LedgerConverter(db, meta).run()
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
        final = Batch()
        orphans = _orphan_ledgers(db)
        for lid in orphans:
            # Format-1 leftovers of a ledger without a meta: nothing reads them.
            final.delete_range(*keys.ledger_range(lid))
            final.delete_range(*_key_block_range(lid))
            log(f"  ledger {lid}: no meta, its format-1 entries removed")
        totals.orphans = len(orphans)
        final.put(keys.FORMAT_KEY, keys.FORMAT_VERSION)
        db.write(final, sync=True)
        log(
            f"{path}: format 2: {totals.converted} ledger(s), {totals.entries} entries in "
            f"{totals.batches} batch(es) ({totals.bytes_before} -> {totals.bytes_after} bytes)"
            + (f"; {totals.already} converted by an earlier run or empty" if totals.already else "")
        )
        db.compact_range(b"E", b"L")  # reclaim the old entries' space now
        return totals
    finally:
        db.close()


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
