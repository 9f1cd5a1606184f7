"""Start-up of the ledger store: read every piece of metadata, trust none of it blindly.

Order and rules (CONTRACT section 11: start-up never deletes what it could not read):

1. The format key decides whether this server may read the store at all.
2. Ledger metas (``L``), topic records (``T``) and cursors (``C``) are scanned. A scan that
   hits an unreadable RocksDB block stops the start with one line: with part of the
   metadata unknown no topic can be proven whole, and guessing would drop topics.
3. Each value is decoded strictly. A topic whose record, cursors or ledger metas fail is
   taken offline (``storage.offline``), untouched on disk; so is a topic whose record
   lists a ledger that has no meta, or whose meta names another topic.
4. Ledgers left open by the previous run are sealed (Pulsar's rollover on topic load),
   except those of offline topics, which are not written at all.
5. Orphan collection deletes a ledger only when its meta was read, its owner is not
   offline, and no topic record or compaction cursor references it: provably nobody's
   (an interrupted compaction's output). Cursors of topics that do not exist go too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from compactlog.errors import CorruptData, StorageError
from compactlog.storage import keys
from compactlog.storage.codec import ROLE_RAW, LedgerMeta
from compactlog.storage.cursor import Cursor, CursorChange
from compactlog.storage.ledger_cursors import cursor_ops
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.offline import OfflineTopic, take_offline
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.types import MessageId, TopicKind

log = logging.getLogger(__name__)


@dataclass
class LoadedLedgers:
    next_ledger: int = 1
    ledgers: dict[int, LedgerMeta] = field(default_factory=dict)
    topics: dict[str, LedgerTopic] = field(default_factory=dict)
    offline: dict[str, OfflineTopic] = field(default_factory=dict)
    bad_metas: dict[int, str] = field(default_factory=dict)  # ledger id -> problem

    def go_offline(self, name: str, reason: str) -> None:
        self.topics.pop(name, None)
        take_offline(self.offline, name, TopicKind.LEDGER, reason)


def check_format(db: RocksDB) -> None:
    fmt = db.get(keys.FORMAT_KEY)
    if fmt is None:
        db.put(keys.FORMAT_KEY, keys.FORMAT_VERSION)
    elif fmt == keys.LEGACY_FORMAT_VERSION:
        raise StorageError(
            f"{db.path} holds ledgers in format 1 (one entry a message); this "
            "server reads format 2 (batches): run `compactlog migrate DATA_DIR` first"
        )
    elif fmt != keys.FORMAT_VERSION:
        raise StorageError(
            f"{db.path} holds ledgers in format {fmt.decode(errors='replace')!r}, "
            f"newer than this server's {keys.FORMAT_VERSION.decode()}"
        )


def load_ledgers(
    db: RocksDB, new_topic: Callable[[str, dict[str, str]], LedgerTopic]
) -> LoadedLedgers:
    """Everything the ledger store keeps in memory, and the writes start-up owes (made)."""
    check_format(db)
    state = LoadedLedgers()
    try:
        raw_next = db.get(keys.NEXT_LEDGER_KEY)
        if raw_next is not None and len(raw_next) != keys.U64.size:
            raise CorruptData(f"next-ledger key holds {len(raw_next)} bytes, not 8")
        state.next_ledger = keys.U64.unpack(raw_next)[0] if raw_next else 1
        _load_metas(db, state)
        _load_topics(db, state, new_topic)
        batch = Batch()
        _load_cursors(db, state, batch)
    except CorruptData as exc:
        raise CorruptData(
            f"ledger store {db.path}: metadata is unreadable ({exc}); start refused so that "
            "no topic is dropped: run `compactlog check DATA_DIR`"
        ) from None
    if state.ledgers:
        state.next_ledger = max(state.next_ledger, max(state.ledgers) + 1)
    if state.bad_metas:
        state.next_ledger = max(state.next_ledger, max(state.bad_metas) + 1)
    _seal_open_ledgers(state, batch)
    for topic in state.topics.values():
        topic.recompute_positions()
    _collect_orphans(state, batch)
    if batch.ops:
        db.write(batch, sync=True)
    return state


def _load_metas(db: RocksDB, state: LoadedLedgers) -> None:
    for key, value in db.scan(*keys.ledger_meta_range()):
        lid = keys.ledger_id_of_meta_key(key)
        try:
            meta = LedgerMeta.decode(lid, value)
            if meta.role not in (0, 1) or meta.entries < 0 or meta.bytes < 0:
                raise ValueError("fields out of range")
        except Exception as exc:
            state.bad_metas[lid] = f"meta of ledger {lid} is malformed ({exc})"
            log.error("ledger %d: meta is malformed, ledger kept untouched: %s", lid, exc)
            continue
        state.ledgers[lid] = meta


def _load_topics(
    db: RocksDB, state: LoadedLedgers, new_topic: Callable[[str, dict[str, str]], LedgerTopic]
) -> None:
    for key, value in db.scan(*keys.topic_range()):
        name = key[1:].decode(errors="replace")
        where = f"topic record {key[:80]!r}"
        try:
            overrides, lids, incarnation = LedgerTopic.parse_record(value)
            topic = new_topic(name, overrides)
            topic.incarnation = incarnation
        except Exception as exc:
            state.go_offline(name, f"{where} is malformed ({exc})")
            continue
        problem = None
        for lid in lids:
            meta = state.ledgers.get(lid)
            if lid in state.bad_metas:
                problem = state.bad_metas[lid]
            elif meta is None:
                problem = f"ledger {lid} is listed in its record but its meta is missing"
            elif meta.topic != name or meta.role != ROLE_RAW:
                problem = f"ledger {lid} is listed in its record but belongs to {meta.topic!r}"
            if problem is not None:
                break
        if problem is not None:
            state.go_offline(name, problem)
            continue
        topic.ledgers = [state.ledgers[lid] for lid in lids]
        state.topics[name] = topic


def _load_cursors(db: RocksDB, state: LoadedLedgers, batch: Batch) -> None:
    """Cursor heads, then their ack ranges (``storage.ledger_cursors``). A head of the
    layout before ranges (its acked ids in the head) is rewritten as head plus ranges."""
    for key, value in db.scan(b"C", b"D"):
        topic_raw, _sep, sub_raw = key[1:].partition(b"\x00")
        name = topic_raw.decode(errors="replace")
        if name in state.offline:
            continue
        owner = state.topics.get(name)
        if owner is None:
            batch.delete(key)  # the topic record scan was complete: no such topic
            log.info("deleting cursor %r: its topic does not exist", key[:80])
            continue
        try:
            sub = sub_raw.decode()
            obj = json.loads(value)
            cursor = owner.cursors[sub] = Cursor.from_head(sub, obj)
        except Exception as exc:
            state.go_offline(name, f"cursor {key[:80]!r} is malformed ({exc})")
            continue
        if "acked" in obj:
            cursor_ops(batch, name, cursor, CursorChange(True, dict(iter(cursor.acked))))
    for key, value in db.scan(*keys.ack_ranges_all()):
        _load_ack_range(state, batch, key, value)


def _load_ack_range(state: LoadedLedgers, batch: Batch, key: bytes, value: bytes) -> None:
    try:
        name, sub, start, end = keys.parse_ack_range(key, value)
    except Exception as exc:
        name = key[1:].partition(b"\x00")[0].decode(errors="replace")
        state.go_offline(name, f"ack range {key[:80]!r} is malformed ({exc})")
        return
    if name in state.offline:
        return
    owner = state.topics.get(name)
    cursor = owner.cursors.get(sub) if owner is not None else None
    if cursor is None:
        batch.delete(key)  # its topic or subscription does not exist
        return
    if start[0] != end[0] or start > end:
        state.go_offline(name, f"ack range {key[:80]!r} is malformed ({start} > {end})")
        return
    cursor.acked.put(MessageId(*start), MessageId(*end))


def _owner_offline(state: LoadedLedgers, meta: LedgerMeta) -> bool:
    return meta.topic in state.offline


def _seal_open_ledgers(state: LoadedLedgers, batch: Batch) -> None:
    """Rollover on reopen: no ledger stays open across a restart."""
    for meta in state.ledgers.values():
        if not meta.sealed and not _owner_offline(state, meta):
            meta.sealed = True
            batch.put(keys.ledger_meta_key(meta.ledger_id), meta.encode())


def _collect_orphans(state: LoadedLedgers, batch: Batch) -> None:
    referenced = {led.ledger_id for t in state.topics.values() for led in t.ledgers}
    for topic in list(state.topics.values()):
        try:
            compacted = topic.compacted_ledger_id()
        except ValueError:
            compacted = None
            state.go_offline(topic.name, "its compaction cursor names no ledger id")
        if compacted is not None:
            referenced.add(compacted)
    for lid in sorted(set(state.ledgers) - referenced):
        meta = state.ledgers[lid]
        if _owner_offline(state, meta):
            continue
        log.info("deleting ledger %d of %r: no topic references it", lid, meta.topic)
        batch.delete(keys.ledger_meta_key(lid))
        batch.delete_range(*keys.ledger_range(lid))
        batch.delete_range(*keys.key_index_range(lid))
        batch.delete_range(*keys.digest_range(lid))
        del state.ledgers[lid]
