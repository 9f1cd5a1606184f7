"""The ledger store's read side in another process: a compaction worker's view.

A worker reads the server's RocksDB through a secondary instance (``rocks.
SecondaryRocksDB``), so it needs none of the server's memory: ledger metadata comes from
the ``L`` keys, batches from the same checked scans as the server's (``LedgerScans``).
The view is as of the last ``catch_up``; a run catches up once at its start, after the
server fixed its input, so that every id up to the run's horizon is visible.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from compactlog.errors import DataLoss, StorageError
from compactlog.storage import keys
from compactlog.storage.codec import LedgerMeta
from compactlog.storage.ledger_scans import LedgerScans
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.rocks_secondary import SecondaryRocksDB
from compactlog.storage.types import MessageId

CATCH_UP_TRIES = 20
CATCH_UP_PAUSE_S = 0.05


class SecondaryLedgerScans(LedgerScans):
    """Checked scans of ledgers over a secondary instance of the server's store."""

    db: SecondaryRocksDB

    def __init__(self, path: Path, secondary_path: Path) -> None:
        shutil.rmtree(secondary_path, ignore_errors=True)  # a dead worker's leftovers
        self.secondary_path = secondary_path
        self.db = SecondaryRocksDB(path, secondary_path)

    def ledger(self, ledger_id: int) -> LedgerMeta | None:
        raw = self.db.get(keys.ledger_meta_key(ledger_id))
        return LedgerMeta.decode(ledger_id, raw) if raw is not None else None

    def topic(self, name: str) -> LedgerTopic:
        raise StorageError("a secondary view of the ledger store has no topics")

    def catch_up_to(self, horizon: MessageId) -> None:
        """Catch up until the batch holding ``horizon`` is visible: the server confirmed
        it (WAL written) before it chose the horizon, so it shows up at once; a few
        retries cover a WAL switch under way. DataLoss if it never does."""
        for _ in range(CATCH_UP_TRIES):
            self.db.catch_up()
            if self.batch_at(horizon.ledger_id, horizon.entry_id) is not None:
                return
            time.sleep(CATCH_UP_PAUSE_S)
        raise DataLoss(
            f"ledger {horizon.ledger_id} entry {horizon.entry_id} is not visible to the "
            "compaction worker's secondary instance"
        )

    def close(self) -> None:
        self.db.close()
        shutil.rmtree(self.secondary_path, ignore_errors=True)
