"""What a LEDGER store holds, kept outside RocksDB, so that a store which opens "fine" but
lost what it had is noticed before anything is deleted.

A RocksDB ``MANIFEST`` cut short at a record boundary opens without an error: the edits
after the cut (the last flush, say) are gone, the store shows an older state, and the
read-write open then deletes the SST files it no longer knows as obsolete. A WAL deleted
or emptied opens without an error too, and the writes only it held are gone. Either way
data vanishes without a word (CONTRACT section 11: removed data must be detected). So the
store keeps, beside its directory (``<store>.catalog``, a checksummed state file):

* the names of its topics (added after a topic's record is synced, removed before it is
  deleted);
* each topic's ledgers and their entry counts, as of the last start or clean stop;
* the store's next ledger id, raised each time a ledger is allocated, after the
  allocation is synced (once a ledger, never once an append).

At start the catalog is compared with what a read-only open (which deletes nothing) finds
(``ledger_catalog_check``): a topic, a ledger or entries the store lacks, or a ledger id
allocator that went back, refuse the start in one line, the files left as they were. The
catalog only ever lists what the store has durably, so a plain crash is never mistaken
for a loss.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from compactlog.errors import CompactlogError, CorruptData
from compactlog.storage.ledger_catalog_check import lost_from
from compactlog.storage.rocks import RocksDB
from compactlog.storage.segmented import state_file

log = logging.getLogger(__name__)

Counts = dict[str, dict[int, int]]  # topic -> ledger id -> entries


def catalog_path(store: Path) -> Path:
    return store.with_name(store.name + ".catalog")


class LedgerCatalog:
    """``names``: the topics the catalog lists, None before it was first written;
    ``ledgers``: their ledgers' entry counts; ``next_ledger``: 0 when unknown."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.path = catalog_path(store)
        self.names: set[str] | None = None
        self.ledgers: Counts = {}
        self.next_ledger = 0
        body = state_file.read(self.path)
        try:
            if body is not None:
                self._parse(json.loads(body))
        except (ValueError, TypeError, AttributeError) as exc:
            raise state_file.BadStateFile(self.path, f"malformed catalog ({exc})") from None

    def _parse(self, obj: object) -> None:
        if isinstance(obj, list):  # the first layout: names only
            self.names = {str(name) for name in obj}
            return
        if not isinstance(obj, dict):
            raise ValueError("not a list or an object")
        self.names = set(obj["topics"])
        self.ledgers = {
            name: {int(lid): int(n) for lid, n in counts.items()}
            for name, counts in obj["ledgers"].items()
        }
        self.next_ledger = int(obj["next_ledger"])

    def check_before_open(self) -> None:
        """Compare the catalog with a read-only open of the store (which deletes nothing);
        ``CorruptData`` naming what the store lost."""
        if not self.names and not self.next_ledger:
            return
        if (self.store / "CURRENT").exists():
            db = RocksDB(self.store, read_only=True)
            try:
                lost = self.lost(db)
            finally:
                db.close()
        else:  # no store at all: everything is lost
            lost = [f"topic {name}" for name in sorted(self.names or ())] or ["every ledger"]
        if lost:
            raise CorruptData(
                f"RocksDB store {self.store} opened without what its catalog lists "
                f"({'; '.join(lost)}): its MANIFEST, WAL or an SST file was lost; nothing was "
                "changed or deleted: restore the store from a backup, or inspect it with "
                "`compactlog check DATA_DIR`",
                path=self.store,
            )

    def lost(self, db: RocksDB) -> list[str]:
        """What the catalog lists and ``db`` lacks, one phrase each (empty: nothing)."""
        return lost_from(db, self.names or set(), self.ledgers, self.next_ledger)

    def take_in(self, names: set[str], ledgers: Counts, next_ledger: int) -> None:
        """At start, after the open (and at a clean stop, after the close): what the store
        holds becomes the catalog, written only when that changes anything. Topics without
        counts (offline ones) keep the counts the catalog had."""
        kept = {n: c for n, c in self.ledgers.items() if n in names and n not in ledgers}
        ledgers = {**kept, **ledgers}
        if self.names is not None and names - self.names:  # a create cut short
            log.warning(
                "%s: topics %s taken into the catalog (a create or delete cut short)",
                self.path,
                ", ".join(sorted(names - self.names)),
            )
        if (names, ledgers, next_ledger) != (self.names, self.ledgers, self.next_ledger):
            self.write(names, ledgers, next_ledger)

    def write(self, names: set[str], ledgers: Counts, next_ledger: int) -> None:
        body = {
            "topics": sorted(names),
            "ledgers": {n: {str(lid): c for lid, c in sorted(ledgers[n].items())} for n in ledgers},
            "next_ledger": next_ledger,
        }
        state_file.write(self.path, json.dumps(body, sort_keys=True).encode())
        self.names, self.ledgers, self.next_ledger = set(names), ledgers, next_ledger

    def _write_or_log(self, names: set[str], next_ledger: int, what: str) -> None:
        """A write that only makes the catalog know more: a failure leaves it knowing less
        (taken in at the next start), so it is logged, never raised."""
        try:
            self.write(names, self.ledgers, next_ledger)
        except CompactlogError as exc:
            log.warning("%s: %s not yet in the catalog: %s", self.path, what, exc)

    def add(self, name: str) -> None:
        """After the topic's record is synced."""
        self._write_or_log((self.names or set()) | {name}, self.next_ledger, f"topic {name!r}")

    def allocated(self, next_ledger: int) -> None:
        """After an allocation of ledgers up to ``next_ledger - 1`` is synced."""
        if next_ledger > self.next_ledger:
            self._write_or_log(self.names or set(), next_ledger, f"ledger {next_ledger - 1}")

    def released(self, next_ledger: int) -> bool:
        """Before the store gives back the ids from ``next_ledger`` on (reserved, never
        handed out): lowered here first, so the catalog never lists more than the store.
        False when the catalog could not be written (the store then keeps its ids)."""
        try:
            self.write(self.names or set(), self.ledgers, next_ledger)
        except CompactlogError as exc:
            log.warning("%s: reserved ledger ids kept: %s", self.path, exc)
            return False
        return True

    def remove(self, name: str) -> None:
        """Before the topic's record is deleted; raises (then nothing is deleted)."""
        if self.names is not None and name in self.names:
            ledgers = {n: c for n, c in self.ledgers.items() if n != name}
            self.write(self.names - {name}, ledgers, self.next_ledger)
