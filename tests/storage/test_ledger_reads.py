"""What a reader's pass over a LEDGER topic's stored batches leaves to others: the block
cache as it was (a pass reads each block once: caching it would only evict what point
reads keep there), and the key index's merges waiting until the reader pauses (they run
after it, as they run after a burst of appends). Real RocksDB, real threads."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from compactlog.storage import key_index
from compactlog.storage.ledger_log import LedgerTopicLog
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record

BLOCK_CACHE = "rocksdb.block-cache-usage"


def _block_cache_bytes(store: LedgerStore) -> int:
    return int(store.db.db.property_int_value(BLOCK_CACHE) or 0)


def _read_all(store: LedgerStore, topic: str) -> tuple[int, int]:
    """(messages, bytes) of every stored batch of ``topic``, read as a Read reads them."""
    log = LedgerTopicLog(store, topic)
    stop = log.visible_end()
    assert stop is not None
    batches = [
        (header.count, len(data)) for data, header, _lo in log.batches(MessageId(0, 0), stop, False)
    ]
    return sum(b[0] for b in batches), sum(b[1] for b in batches)


def test_a_read_of_stored_batches_leaves_the_block_cache_as_it_was(
    open_store: Callable[..., LedgerStore],
) -> None:
    store = open_store()
    store.create_topic("t", {})
    value = b"v" * 100
    for n in range(40):
        store.append("t", [Record(b"k%d" % (n * 100 + i), value) for i in range(100)])
    store.db.flush()  # the batches in table files: a read goes through the block cache
    before = _block_cache_bytes(store)
    messages, size = _read_all(store, "t")
    assert messages == 4000
    # at most the block holding the batch its start was looked up in, not the 40 it read
    assert _block_cache_bytes(store) - before < 2 * size / 40
    # a point read still fills it (the cache keeps what is read again)
    assert store.db.get(next(iter(store.db.scan_keys(b"E", b"F")))) is not None
    assert _block_cache_bytes(store) > before


def test_the_key_index_merges_wait_for_a_reader_to_pause(
    open_store: Callable[..., LedgerStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(key_index, "BLOCKS_BEFORE_MERGE", 4)
    store = open_store()
    store.create_topic("t", {})
    for n in range(6):
        store.append("t", [Record(b"k", b"%d" % n), Record(b"j", b"%d" % n)])
    # a reader that keeps taking batches for several times the indexer's idle wait (0.1 s)
    reading_until = time.monotonic() + 0.6
    while time.monotonic() < reading_until:
        assert _read_all(store, "t")[0] == 12
    assert store.key_indexer.merges == 0
    assert len(key_index.shape(store.db, 1).blocks) == 6
    deadline = time.monotonic() + 10  # then the merge runs on its own
    while key_index.shape(store.db, 1).blocks and time.monotonic() < deadline:
        time.sleep(0.02)
    shape = key_index.shape(store.db, 1)
    assert (len(shape.blocks), len(shape.runs)) == (0, 1)
