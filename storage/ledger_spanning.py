"""A marked part of a spanning publish appended to a LEDGER topic at most once.

The front may send a part again (after its own crash or a shard's, ``storage/spanning.py``);
the part's id runs are kept under ``keys.spanning_part_key`` in the same WriteBatch as its
records, so the second send finds them and answers with the first append's ids instead
of storing the records twice. The look-up and the write happen under the topic's lock, so
two sends of one part racing each other store it once.

Kept parts below the front's floor are forgotten by a range delete riding on a later
part's write, at most once per ``FORGET_EVERY`` of spanning ids (the front's ids count
microseconds), so range tombstones stay few.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compactlog.storage import keys
from compactlog.storage.ledger_append import IdRun, PendingAppend
from compactlog.storage.rocks import Writes
from compactlog.storage.spanning import SpanningPart, decode_runs, encode_runs

if TYPE_CHECKING:
    from compactlog.storage.ledger_store import LedgerStore
    from compactlog.storage.ledger_topic import LedgerTopic

FORGET_EVERY = 10_000_000  # ten seconds of spanning ids


class SpanningParts:
    """What a store keeps of the marked parts it stored, and when it last forgot some."""

    def __init__(self, store: LedgerStore) -> None:
        self.store = store
        self.forgot_below = 0

    def kept(self, topic: LedgerTopic, part: SpanningPart) -> PendingAppend | None:
        """The first append of a part stored before (under the topic's lock), answered
        once its ids are synced, as a first append would be; None when it is new."""
        store = self.store
        kept = store.db.get(keys.spanning_part_key(part.txid, topic.name))
        if kept is None:
            return None
        ticket = store.group_commit.ticket() if store.fsync else 0
        return PendingAppend(store, topic, decode_runs(kept), ticket)

    def keep(
        self, batch: Writes, topic: LedgerTopic, part: SpanningPart, runs: list[IdRun]
    ) -> None:
        """Put the part's ids into the batch of its records, and forget the parts below
        the front's floor when that is due."""
        batch.put(keys.spanning_part_key(part.txid, topic.name), encode_runs(runs))
        if part.floor >= self.forgot_below + FORGET_EVERY:
            batch.delete_range(*keys.spanning_parts_below(part.floor))
            self.forgot_below = part.floor  # the write failing only delays the next one
