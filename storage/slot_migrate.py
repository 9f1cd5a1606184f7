"""``compactlog migrate --slots DATA_DIR``: spread a single-store data dir over store slots.

A data dir written by a server without shards keeps every topic in one RocksDB and one
segments directory at its root (``storage/slots.py``). Served with ``--shards N > 1`` it
must first be cut into slots, each topic into the slot its name hashes to. With the server
stopped (the data dir's lock is taken):

1. the store is brought to the current format first (``storage/migrate.py``);
2. ``slots.tmp/<n>/ledgers`` is built afresh for every slot: the topic records, ledger
   metas, batches, cursors, ack ranges and compaction status of the slot's topics, copied
   key by key, and the store's ``next_ledger`` (so ids stay unique and every incarnation
   check holds); each slot store is synced and closed;
3. each SEGMENTED topic directory is renamed into ``slots.tmp/<n>/segments/`` (a rename:
   segment files are not copied), and each slot gets the ``FORMAT`` file; the cleaner's
   checkpoint is not carried (a cache: the cleaner starts its next pass from the start);
   ``partitioned-topics.json`` is split: each slot's file names the partitioned topics
   of that slot (their partitions are there too: ``storage/slots.py``);
4. ``slots.tmp`` becomes ``slots``, then ``SLOTS`` is written: from that name on the data
   dir is slotted; only then are the root store and segments directory removed.

A run cut short anywhere is finished by running it again: before step 4 the root store is
untouched (step 2 is redone from it) and the topic directories already renamed wait in
``slots.tmp``; after ``SLOTS`` exists only the removal of the root store remains.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from compactlog.storage import keys, partitioned_topics
from compactlog.storage.codec import LedgerMeta
from compactlog.storage.migrate import hold_data_dir, migrate_data_dir
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.segmented.version import CURRENT, FORMAT_FILE, SERVER_DIR
from compactlog.storage.slots import SLOT_COUNT, SLOTS_DIR, SLOTS_FILE, read_layout, slot_of

TMP_DIR = SLOTS_DIR + ".tmp"
BATCH_BYTES = 8 << 20


@dataclass
class SlotMigration:
    topics: int = 0
    keys: int = 0
    segmented_topics: int = 0
    already_slotted: bool = False


def _topic_of_key(key: bytes) -> str | None:
    """The topic a per-topic key (T, C, A, S) belongs to."""
    tag, rest = key[:1], key[1:]
    if tag == b"T" or tag == b"S":
        return rest.decode()
    if tag in (b"C", b"A"):
        return rest.split(b"\x00", 1)[0].decode()
    return None


def _ledger_of_key(key: bytes) -> int:
    if key[:1] == b"L":
        return keys.ledger_id_of_meta_key(key)
    return keys.entry_ids(key)[0]


class _SlotStores:
    """The slot stores being built under ``slots.tmp``, written in bounded batches."""

    def __init__(self, root: Path, next_ledger: bytes | None) -> None:
        self.stores: dict[int, RocksDB] = {}
        self.batches: dict[int, tuple[Batch, int]] = {}
        for slot in range(SLOT_COUNT):
            path = root / str(slot) / "ledgers"
            shutil.rmtree(path, ignore_errors=True)  # redone from the root store
            path.parent.mkdir(parents=True, exist_ok=True)
            store = RocksDB(path)
            store.put(keys.FORMAT_KEY, keys.FORMAT_VERSION)
            if next_ledger is not None:
                store.put(keys.NEXT_LEDGER_KEY, next_ledger)
            self.stores[slot] = store
            self.batches[slot] = (Batch(), 0)

    def put(self, slot: int, key: bytes, value: bytes) -> None:
        batch, size = self.batches[slot]
        batch.put(key, value)
        size += len(key) + len(value)
        if size >= BATCH_BYTES:
            self.stores[slot].write(batch)
            batch, size = Batch(), 0
        self.batches[slot] = (batch, size)

    def close(self) -> None:
        for slot, store in self.stores.items():
            store.write(self.batches[slot][0], sync=True)
            store.close()


def _copy_ledgers(source_path: Path, tmp: Path) -> tuple[int, int]:
    """Step 2: (topics, keys) copied from the root store into the slot stores."""
    source = RocksDB(source_path, read_only=True)
    try:
        ledger_slot: dict[int, int] = {}
        begin, end = keys.ledger_meta_range()
        for key, value in source.scan(begin, end):
            topic = LedgerMeta.decode(keys.ledger_id_of_meta_key(key), value).topic
            ledger_slot[keys.ledger_id_of_meta_key(key)] = slot_of(topic, SLOT_COUNT)
        slots = _SlotStores(tmp, source.get(keys.NEXT_LEDGER_KEY))
        topics = copied = 0
        try:
            for key, value in source.scan(b"\x01", b"\xff"):
                tag = key[:1]
                if tag in (b"L", b"E"):
                    slot = ledger_slot.get(_ledger_of_key(key), 0)
                else:
                    owner = _topic_of_key(key)
                    if owner is None:
                        continue  # a set-aside value (B) stays with the root store, removed
                    slot = slot_of(owner, SLOT_COUNT)
                    topics += tag == b"T"
                slots.put(slot, key, value)
                copied += 1
        finally:
            slots.close()
        return topics, copied
    finally:
        source.close()


def _move_segments(segments: Path, tmp: Path) -> int:
    """Step 3: rename each topic directory into its slot; the number moved now or before."""
    moved = 0
    for slot in range(SLOT_COUNT):
        root = tmp / str(slot) / "segments"
        (root / SERVER_DIR).mkdir(parents=True, exist_ok=True)
        (root / SERVER_DIR / FORMAT_FILE).write_text(f"{CURRENT}\n")
        moved += sum(1 for p in root.iterdir() if p.name != SERVER_DIR)
    if not segments.is_dir():
        return moved
    for entry in sorted(segments.iterdir()):
        if entry.name == SERVER_DIR or not entry.is_dir():
            continue
        home = tmp / str(slot_of(entry.name, SLOT_COUNT)) / "segments" / entry.name
        entry.rename(home)
        moved += 1
    return moved


def _split_partitioned(data_dir: Path, tmp: Path) -> None:
    """Each slot's ``partitioned-topics.json`` holds the partitioned topics of its slot
    (a topic's partitions live in its slot); written before ``SLOTS`` makes them live."""
    topics, pending = partitioned_topics.read(data_dir / partitioned_topics.FILE_NAME)
    for slot in range(SLOT_COUNT):
        mine = {n: t for n, t in topics.items() if slot_of(n, SLOT_COUNT) == slot}
        changes = {n: c for n, c in pending.items() if slot_of(n, SLOT_COUNT) == slot}
        if mine or changes:  # a change a crash cut short goes along, finished at start
            path = tmp / str(slot) / partitioned_topics.FILE_NAME
            partitioned_topics.save(path, mine, changes)


def migrate_to_slots(data_dir: Path, log: Callable[[str], None] = print) -> SlotMigration:
    """Spread ``data_dir`` over store slots (see the module docstring)."""
    report = SlotMigration()
    layout = read_layout(data_dir) if data_dir.is_dir() else None
    if layout is None or not layout.sharded:
        migrate_data_dir(data_dir, log=log)  # the current format first (takes the lock)
    with hold_data_dir(data_dir):
        if layout is None or not layout.sharded:
            tmp = data_dir / TMP_DIR
            if (data_dir / SLOTS_DIR).exists():  # cut short between the rename and SLOTS
                (data_dir / SLOTS_DIR).rename(tmp)
            tmp.mkdir(exist_ok=True)
            ledgers = data_dir / "ledgers"
            if ledgers.exists():
                report.topics, report.keys = _copy_ledgers(ledgers, tmp)
            report.segmented_topics = _move_segments(data_dir / "segments", tmp)
            _split_partitioned(data_dir, tmp)
            tmp.rename(data_dir / SLOTS_DIR)
            (data_dir / (SLOTS_FILE + ".tmp")).write_text(f"{SLOT_COUNT}\n")
            (data_dir / (SLOTS_FILE + ".tmp")).replace(data_dir / SLOTS_FILE)
        else:
            report.already_slotted = True
        for leftover in ("ledgers", "segments", "compaction-work"):
            shutil.rmtree(data_dir / leftover, ignore_errors=True)
        (data_dir / partitioned_topics.FILE_NAME).unlink(missing_ok=True)
        (data_dir / "ledgers.catalog").unlink(missing_ok=True)  # the root store's
        return report
