"""The KeyIndexer: merges the key index's per-batch blocks into sorted runs, off the
publish path (layout and policy: ``storage/key_index.py``).

One thread per ledger store. Appends mark their ledger dirty (a set add, no I/O). The
thread yields to appends and to readers: it merges once both pause for ``idle_s``, or,
under a load that never pauses, when ``max_backlog`` ledgers wait or the oldest has
waited ``max_delay_s``; so a burst of publishes is not slowed by merging (the work
follows it), nor is the read that follows the burst (a merge of 1M records' blocks took
13-16 ms of CPU, and the GIL, inside the first raw Read after their publish), and a
steady stream still gets its index merged every few seconds. Lookups read blocks
and runs alike, so a merge changes the cost of a lookup, never its answer.

A merge reads without locks (blocks and runs change only here or when their ledger is
deleted) and writes under the topic's lock after checking that the ledger is still the
topic's, so a merge never resurrects the index of a ledger that retention or a topic
delete removed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

from compactlog.errors import CompactlogError
from compactlog.storage import key_index
from compactlog.storage.codec import LedgerMeta
from compactlog.storage.rocks import RocksDB

log = logging.getLogger(__name__)

# (the topic's lock, "is the ledger still the topic's?", sealed?) of a raw ledger
IndexedLedger = tuple[AbstractContextManager[Any], Callable[[], bool], bool]
LedgerState = Callable[[int], IndexedLedger | None]


class KeyIndexer:
    def __init__(
        self,
        db: RocksDB,
        ledger_state: LedgerState,
        idle_s: float = 0.1,
        max_delay_s: float = 2.0,
        max_backlog: int = 8,
    ) -> None:
        self._db = db
        self._state = ledger_state
        self._idle_s, self._max_delay_s, self._max_backlog = idle_s, max_delay_s, max_backlog
        self._dirty: set[int] = set()
        self._since = 0.0  # when the oldest dirty ledger became dirty
        self._last = 0.0  # the last append
        self._cond = threading.Condition()
        self._closed = False
        self._merging = threading.Lock()  # one merge of a ledger at a time
        self.merges = 0  # for tests and metrics
        self._thread = threading.Thread(target=self._run, name="key-indexer", daemon=True)
        self._thread.start()

    def dirty(self, ledger_id: int) -> None:
        """An append (or a seal) touched this ledger's index."""
        now = time.monotonic()
        with self._cond:
            self._last = now
            if ledger_id not in self._dirty:
                if not self._dirty:
                    self._since = now
                self._dirty.add(ledger_id)
                if len(self._dirty) in (1, self._max_backlog):
                    self._cond.notify()

    def reading(self) -> None:
        """A reader took a stored batch: due merges wait as after an append. A plain
        store of the time (no lock, no wake-up): the thread looks again when its wait
        ends, so a reader pays a clock read a batch."""
        self._last = time.monotonic()

    def appended(self, before: LedgerMeta | None, runs: Iterable[tuple[int, int, int]]) -> None:
        """An append wrote ``runs``; ``before`` was the topic's current ledger, which the
        append sealed if it rolled over (its index then ends as one run)."""
        if before is not None and before.sealed:
            self.dirty(before.ledger_id)
        for lid, _first, _count in runs:
            self.dirty(lid)

    def _due_in(self, now: float) -> float:
        """Seconds until the dirty ledgers are due (0: now), under the lock."""
        if len(self._dirty) >= self._max_backlog:
            return 0.0
        return max(0.0, min(self._last + self._idle_s, self._since + self._max_delay_s) - now)

    def _take(self) -> list[int] | None:
        with self._cond:
            while not self._closed:
                if not self._dirty:
                    self._cond.wait()
                    continue
                wait = self._due_in(time.monotonic())
                if wait <= 0:
                    taken = sorted(self._dirty)
                    self._dirty.clear()
                    return taken
                self._cond.wait(wait)
            return None

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
