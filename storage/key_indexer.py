"""The KeyIndexer: merges the key index's per-batch blocks into sorted runs, off the
publish path (layout and policy: ``storage/key_index.py``).

One thread per ledger store. Appends mark their ledger dirty (a set add, no I/O); the
thread wakes, lets appends gather for ``settle_s`` so that one merge covers many
batches, and merges what is due. A merge reads without locks (blocks and runs change
only here or when their ledger is deleted) and writes under the topic's lock after
checking that the ledger is still the topic's, so a merge never resurrects the index of
a ledger that retention or a topic delete removed. Nothing here is needed for
correctness: lookups read blocks and runs alike.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from compactlog.errors import CompactlogError
from compactlog.storage import key_index
from compactlog.storage.rocks import RocksDB

log = logging.getLogger(__name__)

# (the topic's lock, "is the ledger still the topic's?", sealed?) of a raw ledger
IndexedLedger = tuple[AbstractContextManager[Any], Callable[[], bool], bool]
LedgerState = Callable[[int], IndexedLedger | None]


class KeyIndexer:
    def __init__(self, db: RocksDB, ledger_state: LedgerState, settle_s: float = 0.05) -> None:
        self._db = db
        self._state = ledger_state
        self._settle_s = settle_s
        self._dirty: set[int] = set()
        self._cond = threading.Condition()
        self._closed = False
        self._merging = threading.Lock()  # one merge of a ledger at a time
        self.merges = 0  # for tests and metrics
        self._thread = threading.Thread(target=self._run, name="key-indexer", daemon=True)
        self._thread.start()

    def dirty(self, ledger_id: int) -> None:
        """An append (or a seal) touched this ledger's index."""
        with self._cond:
            if ledger_id not in self._dirty:
                self._dirty.add(ledger_id)
                self._cond.notify()

    def _take(self) -> list[int] | None:
        with self._cond:
            while not self._dirty and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            self._cond.wait(self._settle_s)
            if self._closed:
                return None
            taken = sorted(self._dirty)
            self._dirty.clear()
            return taken

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            for lid in taken:
                try:
                    self.merge(lid)
                except CompactlogError as exc:  # closed store, damaged block: try later
                    log.warning("key index of ledger %d not merged: %s", lid, exc)

    def merge(self, ledger_id: int) -> bool:
        """Merge what is due in one ledger's index now; True when something was."""
        with self._merging:
            state = self._state(ledger_id)
            if state is None:
                return False
            lock, alive, sealed = state
            batch = key_index.plan_merge(self._db, ledger_id, sealed)
            if batch is None:
                return False
            with lock:
                if not alive():
                    return False
                self._db.write(batch)
            self.merges += 1
            return True

    def drain(self) -> None:
        """Merge every dirty ledger now (tests, and before a clean close)."""
        with self._cond:
            taken = sorted(self._dirty)
            self._dirty.clear()
        for lid in taken:
            self.merge(lid)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
