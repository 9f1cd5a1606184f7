"""``storage.migrate``: a format-1 data dir (one RocksDB entry a message, key blocks)
becomes format 2 (batches), in place, crash-safely, every message read back whole.

Format-1 stores are made here by a copy of the old writer (``LegacyStore``: the
encoding of 03ab8ff's ``storage/codec.py``, ``ledger_append.py`` and the compactor's
``with_id``), written through ``storage.rocks`` like the old store did.
"""

from __future__ import annotations

import fcntl
import gc
import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import crc32c
import grpc
import pytest

from compactlog.errors import CorruptData, StorageError, StoreLocked
from compactlog.storage import batch as codec
from compactlog.storage import keys
from compactlog.storage import migrate as migration
from compactlog.storage.codec import ROLE_COMPACTED, ROLE_RAW, LedgerMeta, key_flags
from compactlog.storage.config import ServerSettings
from compactlog.storage.cursor import COMPACTED_LEDGER_PROPERTY, COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.migrate import MigrationReport, migrate_data_dir
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.segmented.version import read_format
from compactlog.storage.types import MessageId, Record, StoredMessage
from compactlog.storage.views import view_messages
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

SETTINGS = ServerSettings(topic_defaults={})
NOW = 1_700_000_000_000
FIRST = MessageId(0, 0)
LAST = MessageId(2**63, 0)
BIG = 400_000  # four of these make two batches under the 1 MiB cap


# ---- the format-1 writer ------------------------------------------------------------


def v1_key_block_key(ledger_id: int, first_entry: int) -> bytes:
    return struct.pack(">cQQ", b"K", ledger_id, first_entry)


def v1_entry(msg: StoredMessage) -> bytes:
    """The old ``codec.encode_entry``: ``Message`` without its id."""
    out = pb.Message(publish_time_ms=msg.publish_time_ms, event_time_ms=msg.event_time_ms)
    if msg.key is not None:
        out.key = msg.key
    if msg.value is not None:
        out.value = msg.value
    if msg.properties:
        out.properties.update(msg.properties)
    return out.SerializeToString()


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def with_id(ledger_id: int, entry_id: int, data: bytes) -> bytes:
    """The old compactor's ``with_id``: raw entry bytes with the original id in front."""
    inner = b"\x08" + _varint(ledger_id) + (b"\x10" + _varint(entry_id) if entry_id else b"")
    return b"\x0a" + _varint(len(inner)) + inner + data


def key_block_part(data: bytes, key: bytes | None, value: bytes | None) -> bytes:
    head = struct.pack(">BII", key_flags(key, value), len(data), len(key or b""))
    return head + (key or b"")


class LegacyStore:
    """A format-1 ledger store, written the way 03ab8ff's LedgerStore wrote it."""

    def __init__(self, path: Path) -> None:
        self.db = RocksDB(path)
        self.db.put(keys.FORMAT_KEY, keys.LEGACY_FORMAT_VERSION)
        self.next_ledger = 1
        self.topics: dict[str, list[int]] = {}
        self.metas: dict[int, LedgerMeta] = {}
        self.raw: dict[str, list[StoredMessage]] = {}

    def _put_topic(self, batch: Batch, name: str) -> None:
        record = {"kind": 1, "overrides": {}, "ledgers": self.topics[name]}
        batch.put(keys.topic_key(name), json.dumps(record, separators=(",", ":")).encode())

    def create_topic(self, name: str) -> None:
        self.topics[name] = []
        self.raw[name] = []
        batch = Batch()
        self._put_topic(batch, name)
        self.db.write(batch)

    def new_ledger(self, topic: str, role: int = ROLE_RAW) -> int:
        lid = self.next_ledger
        self.next_ledger += 1
        self.db.put(keys.NEXT_LEDGER_KEY, keys.U64.pack(self.next_ledger))
        batch = Batch()
        if role == ROLE_RAW:
            if self.topics[topic]:
                cur = self.metas[self.topics[topic][-1]]
                cur.sealed = True
                batch.put(keys.ledger_meta_key(cur.ledger_id), cur.encode())
            self.topics[topic].append(lid)
            self._put_topic(batch, topic)
        self.metas[lid] = LedgerMeta(ledger_id=lid, topic=topic, role=role)
        batch.put(keys.ledger_meta_key(lid), self.metas[lid].encode())
        self.db.write(batch)
        return lid

    def _append(self, lid: int, items: list[tuple[bytes, bytes | None, bytes | None]]) -> None:
        """One format-1 append: entries, their key block, the ledger meta, one batch."""
        meta = self.metas[lid]
        first = meta.entries
        batch = Batch()
        for i, (data, _key, _value) in enumerate(items):
            batch.put(keys.entry_key(lid, first + i), data)
            meta.bytes += len(data)
        parts = b"".join(key_block_part(d, k, v) for d, k, v in items)
        batch.put(v1_key_block_key(lid, first), parts)
        meta.entries += len(items)
        batch.put(keys.ledger_meta_key(lid), meta.encode())
        self.db.write(batch)

    def publish(self, topic: str, records: list[Record], now: int) -> list[StoredMessage]:
        lid = self.topics[topic][-1]
        meta = self.metas[lid]
        if not meta.entries:
            meta.first_publish_ms = now
        meta.last_publish_ms = now
        msgs = [
            StoredMessage(
                MessageId(lid, meta.entries + i),
                r.key,
                r.value,
                dict(r.properties or {}),
                now,
                r.event_time_ms or now,
            )
            for i, r in enumerate(records)
        ]
        self._append(lid, [(v1_entry(m), m.key, m.value) for m in msgs])
        self.raw[topic] += msgs
        return msgs

    def append_compacted(self, lid: int, msgs: list[StoredMessage]) -> None:
        self._append(lid, [(with_id(*m.id, v1_entry(m)), m.key, m.value) for m in msgs])

    def put_cursor(self, topic: str, cursor: LegacyCursor) -> None:
        """The cursor JSON of format 1: every individually acked id in the head."""
        head = {
            "mark_delete": list(cursor.mark_delete),
            "acked": sorted(list(i) for i in cursor.acked),
            "properties": cursor.properties,
        }
        self.db.put(keys.cursor_key(topic, cursor.name), json.dumps(head).encode())

    def close(self) -> None:
        self.db.close()


class LegacyCursor(NamedTuple):
    name: str
    mark_delete: MessageId
    acked: set[MessageId]
    properties: dict[str, str]


class Legacy:
    """What ``build`` wrote, to compare the migrated store with."""

    def __init__(self, raw: dict[str, list[StoredMessage]], compacted: list[StoredMessage]):
        self.raw = raw
        self.compacted = compacted  # the compacted view of "table"
        self.cursors = {
            ("events", "sub"): LegacyCursor(
                "sub",
                MessageId(1, 3),
                {MessageId(1, 5), MessageId(2, 0)},
                {"who": "reader", "ünï": "cödé"},
            ),
            ("table", COMPACTION_SUBSCRIPTION): LegacyCursor(
                COMPACTION_SUBSCRIPTION, MessageId(4, 1503), set(), {COMPACTED_LEDGER_PROPERTY: "5"}
            ),
        }


def build(data_dir: Path) -> Legacy:
    """A format-1 data dir: raw ledgers 1-3 of "events" (an open one among them), raw
    ledger 4 of "table" with compacted ledger 5 at horizon 4:1503, an unreferenced
    compacted ledger 6 (an interrupted compaction's), an empty topic, cursors."""
    old = LegacyStore(data_dir / "ledgers")
    old.create_topic("events")
    old.new_ledger("events")  # 1
    old.publish(
        "events",
        [
            Record(b"k1", b"v1", {"p": "1", "q": "two"}),
            Record(None, b"keyless"),
            Record(b"k2", None),  # null value
            Record(b"k3", b""),  # empty value
        ],
        NOW,
    )
    old.publish("events", [Record(b"k1", b"v2", {"ünï": "cödé"}, event_time_ms=123)], NOW + 1)
    old.publish("events", [Record(b"n%d" % i, b"x%d" % i) for i in range(2500)], NOW + 2)
    old.new_ledger("events")  # 2
    old.publish("events", [Record(b"big%d" % i, bytes([i]) * BIG) for i in range(4)], NOW + 3)
    old.publish(
        "events",
        [Record(b"", b"empty key"), Record(None, None, {"only": "props"}, event_time_ms=-5)],
        NOW + 4,
    )
    old.new_ledger("events")  # 3, left open
    old.publish("events", [Record(b"a", b"1"), Record(b"b", b"2"), Record(b"c", b"3")], NOW + 5)

    old.create_topic("table")
    old.new_ledger("table")  # 4
    first = old.publish("table", [Record(b"k%d" % i, b"v%d" % i) for i in range(1500)], NOW + 10)
    update = old.publish(
        "table",
        [Record(b"k1", b"new"), Record(b"k2", None), Record(b"k3", b""), Record(None, b"-")],
        NOW + 11,
    )
    tail = old.publish("table", [Record(b"k5", b"after"), Record(b"k6", b"after")], NOW + 12)
    winners = [m for m in first if m.key not in (b"k1", b"k2", b"k3")] + update[:1]
    winners.sort(key=lambda m: m.id)
    lid = old.new_ledger("table", ROLE_COMPACTED)  # 5
    old.append_compacted(lid, winners[:1200])  # compacted key blocks: 1200 and 298 entries
    old.append_compacted(lid, winners[1200:])
    orphan = old.new_ledger("table", ROLE_COMPACTED)  # 6: nobody references it
    old.append_compacted(orphan, winners[:2])
    old.create_topic("empty")

    legacy = Legacy(old.raw, winners + tail)
    for (topic, _sub), cursor in legacy.cursors.items():
        old.put_cursor(topic, cursor)
    old.db.put(keys.status_key("table"), b'{"last_run":{"ok":true}}')
    old.close()
    return legacy


# ---- helpers ------------------------------------------------------------------------


def dump(path: Path) -> list[tuple[bytes, bytes]]:
    db = RocksDB(path)
    try:
        return list(db.scan(b"", b"\xff"))
    finally:
        gc.collect()
        db.close()


def ledger_keys(path: Path, ledger_id: int) -> list[tuple[bytes, bytes]]:
    """A ledger's E and K ranges, as they are."""
    e_begin, e_end = keys.ledger_range(ledger_id)
    k_begin, k_end = v1_key_block_key(ledger_id, 0), struct.pack(">cQ", b"K", ledger_id + 1)
    return [kv for kv in dump(path) if e_begin <= kv[0] < e_end or k_begin <= kv[0] < k_end]


def fmt(path: Path) -> bytes | None:
    return dict(dump(path)).get(keys.FORMAT_KEY)


def quiet(_line: str) -> None:
    pass


@pytest.fixture
def open_store() -> Iterator[list[LedgerStore]]:
    opened: list[LedgerStore] = []
    yield opened
    for store in opened:
        store.close()


def reopen(opened: list[LedgerStore], data_dir: Path) -> LedgerStore:
    store = LedgerStore(data_dir / "ledgers", SETTINGS)
    opened.append(store)
    return store


def assert_reads_like(store: LedgerStore, legacy: Legacy) -> None:
    for topic, msgs in legacy.raw.items():
        assert list(view_messages(store, topic, FIRST, LAST, compacted=False)) == msgs, topic
    assert list(view_messages(store, "table", FIRST, LAST, compacted=True)) == legacy.compacted
    # The compacted view from inside the compacted ledger, and across into the raw tail.
    start = legacy.compacted[1300].id
    assert (
        list(view_messages(store, "table", start, LAST, compacted=True)) == legacy.compacted[1300:]
    )
    for (topic, sub), cursor in legacy.cursors.items():
        got = store.topic(topic).cursors[sub]
        acked = {
            MessageId(start.ledger_id, entry)
            for start, end in got.acked
            for entry in range(start.entry_id, end.entry_id + 1)
        }
        assert (got.mark_delete, acked, got.properties) == (
            cursor.mark_delete,
            cursor.acked,
            cursor.properties,
        )


# ---- tests --------------------------------------------------------------------------


def test_a_format_1_store_is_refused_naming_the_command(tmp_path: Path) -> None:
    build(tmp_path)
    with pytest.raises(StorageError, match="compactlog migrate"):
        LedgerStore(tmp_path / "ledgers", SETTINGS)
    assert fmt(tmp_path / "ledgers") == b"1"


def test_migration_keeps_every_message_id_and_cursor(
    tmp_path: Path, open_store: list[LedgerStore]
) -> None:
    legacy = build(tmp_path)
    lines: list[str] = []
    report = migrate_data_dir(tmp_path, lines.append)
    winners = len(legacy.compacted) - 2  # the compacted view ends with two raw messages
    total = sum(len(m) for m in legacy.raw.values()) + winners + 2  # + ledger 6's two
    assert report == MigrationReport(
        ledger_format_before="1",
        ledgers_converted=6,
        entries=total,
        batches=5 + 3 + 1 + 4 + 3 + 1,
        bytes_before=report.bytes_before,
        bytes_after=report.bytes_after,
    )
    assert not report.already_current
    assert any("ledger 5 (compacted" in line for line in lines)
    assert lines[-1].endswith("migrated to format 2")

    path = tmp_path / "ledgers"
    raw_dump = dump(path)
    assert dict(raw_dump)[keys.FORMAT_KEY] == b"2"
    assert not [k for k, _ in raw_dump if k.startswith(b"K")]
    assert dict(raw_dump)[keys.status_key("table")] == b'{"last_run":{"ok":true}}'

    store = reopen(open_store, tmp_path)
    assert_reads_like(store, legacy)
    assert store.ledger(6) is None  # unreferenced: dropped at start-up, as before

    # Batches follow the old publishes, capped at 1000 messages and about 1 MiB.
    def layout(lid: int) -> list[tuple[int, int, int, bool]]:
        return [(at, h.count, h.publish_time_ms, h.compacted) for at, _d, h in store.batches(lid)]

    assert layout(1) == [
        (0, 4, NOW, False),
        (4, 1, NOW + 1, False),
        (5, 1000, NOW + 2, False),
        (1005, 1000, NOW + 2, False),
        (2005, 500, NOW + 2, False),
    ]
    assert layout(2) == [(0, 2, NOW + 3, False), (2, 2, NOW + 3, False), (4, 2, NOW + 4, False)]
    assert layout(5) == [(0, 1000, 0, True), (1000, 200, 0, True), (1200, 298, 0, True)]
    heads = [h for _at, _d, h in store.batches(2)]
    assert heads[2].max_event_time_ms == NOW + 4  # max of -5 and the defaulted NOW + 4
    compacted = [h for _at, _d, h in store.batches(5)]
    assert compacted[0].first_id == legacy.compacted[0].id
    assert compacted[-1].last_id == legacy.compacted[1497].id
    for lid in (1, 2, 3, 4, 5):
        meta = store.ledger(lid)
        assert meta is not None
        assert meta.bytes == sum(len(d) for _at, d, _h in store.batches(lid))

    # A publish after the migration continues the ids (a new ledger, as after any restart).
    ids = store.append("events", [Record(b"new", b"1")])
    assert ids == [MessageId(7, 0)]
    got = list(view_messages(store, "events", MessageId(3, 0), LAST, compacted=False))
    assert [(m.id, m.value) for m in got][-2:] == [(MessageId(3, 2), b"3"), (ids[0], b"1")]

    # Reopened after the new write, everything still reads back.
    store.close()
    open_store.clear()
    store = reopen(open_store, tmp_path)
    assert (
        list(view_messages(store, "events", FIRST, LAST, compacted=False))[:-1]
        == (legacy.raw["events"])
    )


def test_a_second_run_does_nothing_and_says_so(tmp_path: Path) -> None:
    build(tmp_path)
    migrate_data_dir(tmp_path, quiet)
    before = dump(tmp_path / "ledgers")
    lines: list[str] = []
    report = migrate_data_dir(tmp_path, lines.append)
    assert report.already_current and report.ledger_format_before == "2"
    assert report.ledgers_converted == 0 and report.entries == 0
    assert "nothing to do" in lines[-1]
    assert dump(tmp_path / "ledgers") == before


def test_an_empty_data_dir_needs_nothing(tmp_path: Path) -> None:
    lines: list[str] = []
    report = migrate_data_dir(tmp_path, lines.append)
    assert report.already_current and report.ledger_format_before is None
    assert not (tmp_path / "ledgers").exists()
    assert "nothing to do" in lines[-1]


def test_a_missing_data_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="does not exist"):
        migrate_data_dir(tmp_path / "nope", quiet)


def test_refused_while_a_server_holds_the_data_dir(tmp_path: Path) -> None:
    build(tmp_path)
    with open(tmp_path / "LOCK.server", "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("pid 4242")
        held.flush()
        with pytest.raises(StoreLocked, match="pid 4242"):
            migrate_data_dir(tmp_path, quiet)
    assert fmt(tmp_path / "ledgers") == b"1"
    assert migrate_data_dir(tmp_path, quiet).ledgers_converted == 6


class Crash(Exception):
    pass


@pytest.mark.parametrize("after", [1, 3, 6])
def test_a_rerun_after_a_crash_finishes_with_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int, open_store: list[LedgerStore]
) -> None:
    clean, crashed = tmp_path / "clean", tmp_path / "crashed"
    clean.mkdir()
    crashed.mkdir()
    build(clean)
    legacy = build(crashed)
    migrate_data_dir(clean, quiet)

    written: list[int] = []

    def crash(ledger_id: int) -> None:
        written.append(ledger_id)
        if len(written) == after:
            raise Crash()

    monkeypatch.setattr(migration, "_ledger_written", crash)
    with pytest.raises(Crash):
        migrate_data_dir(crashed, quiet)
    monkeypatch.undo()
    assert fmt(crashed / "ledgers") == b"1"  # the server still refuses the store
    with pytest.raises(StorageError, match="compactlog migrate"):
        LedgerStore(crashed / "ledgers", SETTINGS)

    report = migrate_data_dir(crashed, quiet)
    assert report.ledgers_converted == 6 - after
    assert report.ledgers_already_converted == after
    assert dump(crashed / "ledgers") == dump(clean / "ledgers")
    assert_reads_like(reopen(open_store, crashed), legacy)


def _corrupt_wire_type(data: bytes) -> bytes:
    assert data[0] == 0x12  # the key field: made wire type 3, the same size
    return b"\x13" + data[1:]


CORRUPTIONS = {
    "garbage": lambda data: b"\xff\xff\xff\xff",
    "truncated": lambda data: data[:-1],
    "wire type": _corrupt_wire_type,
    "an id in a raw entry": lambda data: with_id(2, 1, data),
    "missing": None,
}


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_a_corrupt_entry_stops_the_migration_naming_it(
    tmp_path: Path, how: str, open_store: list[LedgerStore]
) -> None:
    legacy = build(tmp_path)
    path = tmp_path / "ledgers"
    key = keys.entry_key(2, 1)
    original = dict(dump(path))[key]
    db = RocksDB(path)
    change = CORRUPTIONS[how]
    batch = Batch()
    if change is None:
        batch.delete(key)
    else:
        batch.put(key, change(original))
    db.write(batch)
    db.close()
    before = ledger_keys(path, 2)

    with pytest.raises(CorruptData, match=r"topic 'events' ledger 2 entry 1: ") as info:
        migrate_data_dir(tmp_path, quiet)
    assert "compactlog migrate" in str(info.value)
    assert ledger_keys(path, 2) == before  # nothing of that ledger converted
    assert not [k for k, _ in ledger_keys(path, 1) if k.startswith(b"K")]  # ledger 1 was
    assert fmt(path) == b"1"
    with pytest.raises(StorageError, match="compactlog migrate"):
        LedgerStore(path, SETTINGS)

    db = RocksDB(path)
    db.put(key, original)  # restored from a backup: the retry finishes the job
    db.close()
    report = migrate_data_dir(tmp_path, quiet)
    assert (report.ledgers_already_converted, report.ledgers_converted) == (1, 5)
    assert_reads_like(reopen(open_store, tmp_path), legacy)


def test_a_compacted_ledger_whose_ids_do_not_ascend_is_refused(tmp_path: Path) -> None:
    old = LegacyStore(tmp_path / "ledgers")
    old.create_topic("t")
    old.new_ledger("t")
    msgs = old.publish("t", [Record(b"a", b"1"), Record(b"b", b"2"), Record(b"c", b"3")], NOW)
    lid = old.new_ledger("t", ROLE_COMPACTED)
    old.append_compacted(lid, msgs[:1])
    old.append_compacted(lid, [msgs[2], msgs[1]])  # the second block goes backwards
    old.close()
    with pytest.raises(CorruptData, match=r"topic 't' ledger 2 entry 2: original id 1:1"):
        migrate_data_dir(tmp_path, quiet)
    assert fmt(tmp_path / "ledgers") == b"1"


def test_an_entry_count_that_disagrees_with_the_meta_is_refused(tmp_path: Path) -> None:
    build(tmp_path)
    path = tmp_path / "ledgers"
    meta = LedgerMeta.decode(3, dict(dump(path))[keys.ledger_meta_key(3)])
    meta.entries += 1
    db = RocksDB(path)
    db.put(keys.ledger_meta_key(3), meta.encode())
    db.close()
    with pytest.raises(CorruptData, match="ledger 3 entry 3: ledger holds 3 entries, its meta 4"):
        migrate_data_dir(tmp_path, quiet)


def test_format_1_leftovers_of_a_ledger_without_meta_are_removed(tmp_path: Path) -> None:
    build(tmp_path)
    path = tmp_path / "ledgers"
    db = RocksDB(path)
    batch = Batch()
    data = v1_entry(StoredMessage(MessageId(99, 0), b"k", b"v"))
    batch.put(keys.entry_key(99, 0), data)
    batch.put(v1_key_block_key(99, 0), key_block_part(data, b"k", b"v"))
    db.write(batch)
    db.close()
    report = migrate_data_dir(tmp_path, quiet)
    assert report.orphan_ledgers_removed == 1
    assert ledger_keys(path, 99) == []


# ---- segments -----------------------------------------------------------------------


def v1_segment_record(offset: int, publish: int, key: bytes, value: bytes) -> bytes:
    """One format-1 segment record (see ``storage/segmented/migrate.py``)."""
    body = struct.pack(">qqqqiii", offset, publish, publish, -1, len(key), len(value), 0)
    body += key + value
    return struct.pack(">II", len(body) + 4, crc32c.crc32c(body)) + body


def test_segments_are_migrated_after_the_ledgers(tmp_path: Path) -> None:
    build(tmp_path)
    topic = tmp_path / "segments" / "s"
    topic.mkdir(parents=True)
    (topic / "topic.json").write_text(json.dumps({"overrides": {}}))
    (topic / f"{0:020d}.log").write_bytes(
        v1_segment_record(0, NOW, b"a", b"1") + v1_segment_record(1, NOW, b"b", b"2")
    )
    lines: list[str] = []
    report = migrate_data_dir(tmp_path, lines.append)
    assert report.segments_migrated and report.segments_converted == 1
    assert report.ledgers_converted == 6
    assert read_format(tmp_path / "segments") == 2
    data = (topic / f"{0:020d}.log").read_bytes()
    assert [(m.id.entry_id, m.key, m.value) for m in codec.decode_batch(data, "s")] == [
        (0, b"a", b"1"),
        (1, b"b", b"2"),
    ]
    again = migrate_data_dir(tmp_path, lines.append)
    assert again.already_current and not again.segments_migrated


# ---- the command, end to end ----------------------------------------------------------


def test_the_server_refuses_format_1_and_serves_it_after_compactlog_migrate(
    tmp_path: Path, server_factory: Any
) -> None:
    """What a user upgrading sees: one line naming the command, the command, then data."""
    data_dir = tmp_path / "old"
    legacy = build(data_dir)
    refused = server_factory(data_dir=data_dir, start=False)
    proc = subprocess.run(refused.command(), capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and "compactlog migrate" in lines[0]
    cli = [sys.executable, "-m", "compactlog", "migrate", str(data_dir)]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "migrated" in done.stdout and "6 ledgers" in done.stdout
    srv = refused.start()
    channel = grpc.insecure_channel(srv.address)
    try:
        stub = pb_grpc.LogStub(channel)
        got = [
            (m.id.ledger_id, m.id.entry_id, m.value)
            for resp in stub.Read(pb.ReadRequest(topic="table", read_compacted=True), timeout=30)
            for m in resp.messages
        ]
        assert got == [(m.id.ledger_id, m.id.entry_id, m.value) for m in legacy.compacted]
    finally:
        channel.close()
    again = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "in use" in again.stderr  # the server holds the dir
