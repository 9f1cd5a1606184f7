"""A compacted read from any id starts at the right message: the view finds its first
compacted batch by looking at the first batch, then by a binary search over batch headers
(``storage.views._compacted_start``). Real RocksDB, a real two-phase run; starts at, just
before and just after every compacted batch's ends are checked against the whole view."""

from __future__ import annotations

from pathlib import Path

from compactlog.compactor.two_phase import TwoPhaseCompactor
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record
from compactlog.storage.views import compacted_state, view_messages

KEYS, MESSAGES, PER_APPEND = 5000, 12_000, 500


def test_a_compacted_read_from_any_id_starts_at_the_first_id_at_or_after_it(
    tmp_path: Path,
) -> None:
    store = LedgerStore(tmp_path / "l", ServerSettings(publish_durability="wal", topic_defaults={}))
    try:
        store.create_topic("t", {})
        for start in range(0, MESSAGES, PER_APPEND):
            records = [
                Record(b"k%05d" % (i * 7 % KEYS), b"v%d" % i)
                for i in range(start, start + PER_APPEND)
            ]
            store.append("t", records)
        TwoPhaseCompactor(LedgerStoreCompactionStorage(store, in_server=False), 1 << 26).compact(
            "t"
        )
        state = compacted_state(store, "t")
        assert state is not None
        lac = store.topic("t").lac
        assert lac is not None
        whole = [m.id for m in view_messages(store, "t", MessageId(0, 0), lac, True)]
        assert len(whole) == KEYS
        headers = [h for _at, _data, h in store.batches(state.ledger_id)]
        assert len(headers) >= 2  # the search has batches to search
        starts = {MessageId(0, 0), whole[-1], whole[-1].next()}
        for h in headers:
            for edge in (h.first_id, h.last_id):
                starts |= {edge, edge.next(), MessageId(edge.ledger_id, max(edge.entry_id - 1, 0))}
        for start in sorted(starts):
            got = [m.id for m in view_messages(store, "t", start, lac, True)]
            assert got == [i for i in whole if i >= start], start
    finally:
        store.close()
