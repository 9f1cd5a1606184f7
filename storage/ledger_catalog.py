"""The LEDGER topics a store holds, kept outside RocksDB, so that a store which opens
"fine" but lost what it had is noticed before anything is deleted.

A RocksDB ``MANIFEST`` cut short at a record boundary opens without an error: the edits
after the cut (the last flush, say) are gone, the store shows an older state, and the
read-write open then deletes the SST files it no longer knows as obsolete. A topic
vanishes without a word (CONTRACT section 11: removed data must be detected). So the
store keeps, beside its directory (``<store>.catalog``, a checksummed state file), the
names of its topics, and at start compares them with what a read-only open (which
deletes nothing) finds: a name the store lacks refuses the start in one line, the
files left as they were.

The catalog only ever lists what the store has durably: a topic is added after its
record is synced, removed before its record is deleted. So a crash between the two
writes leaves the store with a topic the catalog lacks (taken in at the next start),
never the other way round.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from compactlog.errors import CompactlogError, CorruptData
from compactlog.storage import keys
from compactlog.storage.rocks import RocksDB
from compactlog.storage.segmented import state_file

log = logging.getLogger(__name__)


def catalog_path(store: Path) -> Path:
    return store.with_name(store.name + ".catalog")


def stored_topics(db: RocksDB) -> set[str]:
    """The names of every topic record in ``db``, readable or not."""
    begin, end = keys.topic_range()
    return {key[1:].decode(errors="replace") for key in db.scan_keys(begin, end)}


class LedgerCatalog:
    """``names``: the topics the catalog lists, None before it was first written."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.path = catalog_path(store)
        body = state_file.read(self.path)
        try:
            self.names: set[str] | None = None if body is None else set(json.loads(body))
        except (ValueError, TypeError) as exc:
            raise state_file.BadStateFile(self.path, f"malformed catalog ({exc})") from None

    def check_before_open(self) -> None:
        """Compare the catalog with a read-only open of the store (which deletes nothing);
        ``CorruptData`` naming the topics the store lost."""
        if not self.names:
            return
        found: set[str] = set()
        if (self.store / "CURRENT").exists():  # else no store at all: every topic is lost
            db = RocksDB(self.store, read_only=True)
            try:
                found = stored_topics(db)
            finally:
                db.close()
        missing = sorted(self.names - found)
        if missing:
            raise CorruptData(
                f"RocksDB store {self.store} opened without topics its catalog lists "
                f"({', '.join(missing)}): its MANIFEST or an SST file was lost; nothing was "
                "changed or deleted: restore the store from a backup, or inspect it with "
                "`compactlog check DATA_DIR`",
                path=self.store,
            )

    def take_in(self, names: set[str]) -> None:
        """At start, after the open: the store's topics (the loaded ones, readable or not)
        become the catalog, written only when that changes anything."""
        if names != self.names:
            self.write(names)

    def write(self, names: set[str]) -> None:
        state_file.write(self.path, json.dumps(sorted(names)).encode())
        self.names = set(names)

    def add(self, name: str) -> None:
        """After the topic's record is synced; a failure only leaves it out (it is taken in
        at the next start), so it is logged, never raised."""
        try:
            self.write((self.names or set()) | {name})
        except CompactlogError as exc:
            log.warning("%s: topic %r not yet in the catalog: %s", self.path, name, exc)

    def remove(self, name: str) -> None:
        """Before the topic's record is deleted; raises (then nothing is deleted)."""
        if self.names is not None and name in self.names:
            self.write(self.names - {name})
