"""LEDGER topics on RocksDB: ledgers, appends, scans, cursors and retention.

A topic is an ordered list of append-only ledgers with store-wide increasing ids. The
current ledger rolls over at ``ledger.max.entries`` / ``ledger.max.bytes`` and when the
topic is reopened after a restart (ledgers open at start-up are sealed, as Pulsar does
on topic load). Readers see entries up to the last confirmed id: with the default
``fsync`` durability an append becomes visible, and is acknowledged, only after the
group commit has synced it. Compacted ledgers are ledgers too (role COMPACTED),
referenced from the ``__compaction`` cursor rather than the topic's ledger list; ledgers
nobody references (an interrupted compaction's) are deleted at start-up.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from compactlog.crash_points import reached
from compactlog.errors import (
    CompactlogError,
    TopicExists,
    TopicNotFound,
)
from compactlog.storage import keys
from compactlog.storage.codec import ROLE_RAW, LedgerMeta
from compactlog.storage.compacted_ledgers import CompactedLedgers
from compactlog.storage.config import LedgerTopicConfig, ServerSettings, effective_topic_config
from compactlog.storage.cursor import COMPACTED_LEDGER_PROPERTY
from compactlog.storage.group_commit import GroupCommit
from compactlog.storage.key_index import build_missing
from compactlog.storage.key_indexer import IndexedLedger, KeyIndexer
from compactlog.storage.ledger_across import append_across
from compactlog.storage.ledger_append import PendingAppend
from compactlog.storage.ledger_appends import LedgerAppends
from compactlog.storage.ledger_catalog import LedgerCatalog
from compactlog.storage.ledger_cursors import LedgerCursors
from compactlog.storage.ledger_load import load_ledgers
from compactlog.storage.ledger_scans import KeyEntry, StoredBatch
from compactlog.storage.ledger_spanning import SpanningParts
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.offline import OfflineTopic
from compactlog.storage.retention import ledgers_to_delete
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.topic_log import ChangeListeners
from compactlog.storage.types import TopicKind

log = logging.getLogger(__name__)

# Ledger ids reserved by one synced allocator write and one catalog write: a topic rolls a
# ledger every ``ledger.max.entries`` (50,000) records, and each of those two fsyncs (three
# with the catalog's directory) stalled its writer. Ids reserved and never handed out (the
# server stopped first) are skipped, never reused.
LEDGER_ID_BLOCK = 16


class LedgerStore(LedgerAppends, CompactedLedgers, LedgerCursors):
    db: RocksDB

    def __init__(
        self, path: Path, settings: ServerSettings, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.catalog = LedgerCatalog(path)
        self.catalog.check_before_open()  # a store that lost topics is not opened read-write
        self.db = RocksDB(path, settings.ledger_wal_recovery_mode)
        self._lock = threading.RLock()
        self._topics: dict[str, LedgerTopic] = {}
        self._ledgers: dict[int, LedgerMeta] = {}  # every ledger, raw and compacted
        self._offline: dict[str, OfflineTopic] = {}
        self.fsync = settings.publish_durability == "fsync"
        self.group_commit = GroupCommit(self.db.sync_wal)
        self.spanning_parts = SpanningParts(self)  # marked parts stored (ledger_spanning)
        self.changes = ChangeListeners()
        try:
            self._load()
            self._take_in_catalog()  # what a crash left out, what start-up sealed
            built = build_missing(
                self.db, [led.ledger_id for t in self._topics.values() for led in t.ledgers]
            )
            if built:
                log.info("key index built for %d batches written before it existed", built)
        except BaseException:
            self.group_commit.close()
            self.db.close()
            raise
        self.key_indexer = KeyIndexer(self.db, self._index_state)
        for lid, meta in self._ledgers.items():
            if meta.role == ROLE_RAW:
                self.key_indexer.dirty(lid)  # sealed at start-up: each ends as one run

    # ---- start-up -------------------------------------------------------------------

    def _load(self) -> None:
        """Read the metadata (``storage.ledger_load``: nothing unreadable is deleted)."""
        state = load_ledgers(self.db, self._new_topic)
        self._next_ledger = state.next_ledger
        self._reserved_to = state.next_ledger  # ids below it are durably allocated
        self._ledgers = state.ledgers
        self._topics = state.topics
        self._offline = state.offline

    def _take_in_catalog(self) -> None:
        counts = {
            name: {led.ledger_id: led.entries for led in topic.ledgers}
            for name, topic in self._topics.items()
        }
        self.catalog.take_in({*self._topics, *self._offline}, counts, self._reserved_to)

    def _index_state(self, ledger_id: int) -> IndexedLedger | None:
        """What the key indexer needs to merge a raw ledger's index safely."""
        meta = self._ledgers.get(ledger_id)
        topic = None if meta is None else self._topics.get(meta.topic)
        if meta is None or topic is None or meta.role != ROLE_RAW:
            return None

        def alive() -> bool:
            return not topic.deleted and self._ledgers.get(ledger_id) is meta

        return topic.lock, alive, meta.sealed

    def _new_topic(self, name: str, overrides: dict[str, str], incarnation: int = 0) -> LedgerTopic:
        effective = effective_topic_config(
            TopicKind.LEDGER, overrides, self.settings.defaults_for(TopicKind.LEDGER)
        )
        return LedgerTopic(
            name,
            overrides,
            effective,
            LedgerTopicConfig.from_effective(effective),
            self.changes.notify,
            incarnation,
        )

    # ---- topics ---------------------------------------------------------------------

    def topic(self, name: str) -> LedgerTopic:
        topic = self._topics.get(name)
        if topic is None:
            offline = self._offline.get(name)
            if offline is not None:
                raise offline.error()
            raise TopicNotFound(f"topic {name!r} does not exist", topic=name)
        return topic

    def has_topic(self, name: str) -> bool:
        """Served and offline topics alike: the name is taken either way."""
        return name in self._topics or name in self._offline

    def topic_names(self) -> list[str]:
        """The topics being served (offline ones: ``offline_topics``)."""
        return sorted(self._topics)

    def offline_topics(self) -> dict[str, OfflineTopic]:
        return dict(self._offline)

    def create_topic(self, name: str, overrides: dict[str, str]) -> LedgerTopic:
        with self._lock:
            if name in self._topics:
                raise TopicExists(f"topic {name!r} already exists", topic=name)
            topic = self._new_topic(name, dict(overrides), self._next_ledger)
            batch = Batch()
            batch.put(keys.topic_key(name), topic.record())
            self.db.write(batch, sync=True)  # synced before the catalog lists it
            reached("ledger_create_before_catalog")
            self._topics[name] = topic
            self.catalog.add(name)
            return topic

    def update_config(self, name: str, overrides: dict[str, str]) -> LedgerTopic:
        with self._lock:
            old = self.topic(name)
            with old.lock:
                fresh = self._new_topic(name, dict(overrides))
                old.overrides, old.effective, old.config = (
                    fresh.overrides,
                    fresh.effective,
                    fresh.config,
                )
                self.db.put(keys.topic_key(name), old.record())
            return old

    def delete_topic(self, name: str) -> None:
        with self._lock:
            if name in self._offline:
                self._delete_offline_topic(name)
                return
            topic = self.topic(name)
            with topic.lock:
                self.catalog.remove(name)  # first: the catalog never lists less than the store
                reached("ledger_delete_after_catalog")
                batch = Batch()
                batch.delete(keys.topic_key(name))
                batch.delete(keys.status_key(name))
                batch.delete_range(*keys.cursor_range(name))
                batch.delete_range(*keys.ack_range_range(name))
                doomed = [led.ledger_id for led in topic.ledgers]
                compacted = topic.compacted_ledger_id()
                if compacted is not None:
                    doomed.append(compacted)
                for lid in doomed:
                    self._delete_ledger_ops(batch, lid)
                self.db.write(batch, sync=self.fsync)
                for lid in doomed:
                    self._ledgers.pop(lid, None)
                topic.deleted = True
                del self._topics[name]
            self.changes.notify(name)

    def _delete_offline_topic(self, name: str) -> None:
        """Give up on an offline topic: its record, cursors, status and the ledgers whose
        meta names it (and that no served topic lists) go."""
        self.catalog.remove(name)
        batch = Batch()
        batch.delete(keys.topic_key(name))
        batch.delete(keys.status_key(name))
        batch.delete_range(*keys.cursor_range(name))
        batch.delete_range(*keys.ack_range_range(name))
        listed = {led.ledger_id for t in self._topics.values() for led in t.ledgers}
        doomed = [
            lid for lid, meta in self._ledgers.items() if meta.topic == name and lid not in listed
        ]
        for lid in doomed:
            self._delete_ledger_ops(batch, lid)
        self.db.write(batch, sync=True)
        for lid in doomed:
            self._ledgers.pop(lid, None)
        del self._offline[name]
        log.warning("deleted offline topic %r and %d ledger(s)", name, len(doomed))
        self.changes.notify(name)

    # ---- ledgers --------------------------------------------------------------------

    def _allocate_ledger(self, topic: str, role: int) -> LedgerMeta:
        """A new ledger id from the ids reserved; when they run out, the next
        ``LEDGER_ID_BLOCK`` are reserved, synced at once so that ids are never reused, then
        raised in the catalog (so a store that loses the allocation is noticed)."""
        with self._lock:
            lid = self._next_ledger
            if lid >= self._reserved_to:
                reserved = lid + LEDGER_ID_BLOCK
                batch = Batch()
                batch.put(keys.NEXT_LEDGER_KEY, keys.U64.pack(reserved))
                self.db.write(batch, sync=True)
                self._reserved_to = reserved
                self.catalog.allocated(reserved)
            self._next_ledger = lid + 1
            meta = LedgerMeta(ledger_id=lid, topic=topic, role=role)
            self._ledgers[lid] = meta
            return meta

    def _release_ids(self) -> None:
        """At a clean stop, the reserved ids never handed out go back (the catalog first),
        so ledger ids stay consecutive across clean restarts; a crash skips them."""
        with self._lock:
            fault = self.db.fault
            if self._reserved_to <= self._next_ledger or (fault and fault.error):
                return
            if not self.catalog.released(self._next_ledger):
                return
            batch = Batch()
            batch.put(keys.NEXT_LEDGER_KEY, keys.U64.pack(self._next_ledger))
            try:
                self.db.write(batch, sync=True)
            except CompactlogError as exc:
                log.warning("%s: reserved ledger ids kept: %s", self.db.path, exc)
                return
            self._reserved_to = self._next_ledger

    def _delete_ledger_ops(self, batch: Batch, ledger_id: int) -> None:
        batch.delete(keys.ledger_meta_key(ledger_id))
        batch.delete_range(*keys.ledger_range(ledger_id))
        batch.delete_range(*keys.key_index_range(ledger_id))
        batch.delete_range(*keys.digest_range(ledger_id))

    def ledger(self, ledger_id: int) -> LedgerMeta | None:
        return self._ledgers.get(ledger_id)

    def delete_ledger(self, ledger_id: int) -> None:
        batch = Batch()
        self._delete_ledger_ops(batch, ledger_id)
        self.db.write(batch, sync=self.fsync)
        self._ledgers.pop(ledger_id, None)

    # ---- append ---------------------------------------------------------------------

    def append_across_start(self, parts: Sequence[tuple[str, bytes, int]]) -> list[PendingAppend]:
        """Append ``(topic, PublishRequest bytes, partition)`` parts in ONE RocksDB write:
        all of them or none, also across a crash (``storage.ledger_across``)."""
        return append_across(self, parts, int(self.clock() * 1000), self._allocate_ledger)

    # ---- status blobs (compaction status survives restarts) -------------------------

    def put_status(self, name: str, status: dict[str, object]) -> None:
        self.db.put(keys.status_key(name), json.dumps(status).encode())

    def get_status(self, name: str) -> dict[str, object] | None:
        """The stored status blob; one that is not a JSON object is set aside (kept
        under a ``bad`` key, logged) and never used."""
        raw = self.db.get(keys.status_key(name))
        if not raw:
            return None
        try:
            status = json.loads(raw)
            if isinstance(status, dict):
                return status
        except ValueError:
            pass
        self.set_aside_status(name, "not a JSON object")
        return None

    def set_aside_status(self, name: str, problem: str) -> None:
        """Move a status blob that failed validation out of the way (``keys.bad_key``)."""
        key = keys.status_key(name)
        raw = self.db.get(key)
        if raw is None:
            return
        bad = keys.bad_key(key, int(self.clock() * 1000))
        batch = Batch()
        batch.put(bad, raw)
        batch.delete(key)
        self.db.write(batch, sync=True)
        log.error("compaction status of %r is malformed (%s): set aside as %r", name, problem, bad)

    # ---- retention ------------------------------------------------------------------

    def enforce_retention(self, name: str) -> list[int]:
        """Delete the whole ledgers retention allows; return their ids."""
        topic = self.topic(name)
        with topic.lock:
            positions = [c.mark_delete for c in topic.cursors.values()]
            doomed = ledgers_to_delete(
                topic.ledgers, positions, topic.config, int(self.clock() * 1000)
            )
            if not doomed:
                return []
            gone = {led.ledger_id for led in doomed}
            topic.ledgers = [led for led in topic.ledgers if led.ledger_id not in gone]
            topic.recompute_positions()
            batch = Batch()
            for lid in gone:
                self._delete_ledger_ops(batch, lid)
            batch.put(keys.topic_key(name), topic.record())
            self.db.write(batch, sync=self.fsync)
            for lid in gone:
                self._ledgers.pop(lid, None)
        for lid in sorted(gone):
            log.info("retention deleted ledger %d of topic %s", lid, name)
        return sorted(gone)

    # ---- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        self.key_indexer.close()
        self.group_commit.close()
        for topic in list(self._topics.values()):
            topic.closed = True
            self.changes.notify(topic.name)
        self._release_ids()
        self.db.close()
        try:  # a clean stop: what the store holds now is on disk
            self._take_in_catalog()
        except CompactlogError as exc:
            log.warning("%s: not updated at the stop: %s", self.catalog.path, exc)


__all__ = ["COMPACTED_LEDGER_PROPERTY", "KeyEntry", "LedgerStore", "StoredBatch"]
