"""The key digests stored beside a compacted ledger's batches (``ledger_digests``): a
past view over a ledger with them is byte for byte the view over the same ledger without
them (the merge then hashes the keys, as for ledgers written before digests were
stored); a damaged or foreign digest record is detected and not used; the records go
with their ledger."""

from __future__ import annotations

import gc
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.compactor.two_phase import TwoPhaseCompactor
from compactlog.compactor.two_phase import compactor as compactor_module
from compactlog.compactor.two_phase.as_of import AsOfView
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.ledger_digests import StoredDigests
from compactlog.storage import keys
from compactlog.storage.check import check_data_dir
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.migrate import LEDGERS_DIR
from compactlog.storage.rocks import Batch
from compactlog.storage.types import MessageId, Record

KEYS = st.sampled_from([b"a", b"b", b"c", b"d", b"e", None])
VALUES = st.sampled_from([b"1", b"22", b"", None])
BATCHES = st.lists(st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=6), max_size=6)
EARLIEST = MessageId(0, 0)


def view_bytes(store: LedgerStore, as_of: MessageId) -> list[bytes]:
    """The past view's batches exactly as a Read sends them."""
    view = AsOfView(store, "t", as_of, 1 << 20)
    stop = view.visible_end()
    if stop is None:
        return []
    return [bytes(data) for data, _header, _start in view.batches(EARLIEST, stop, True)]


def compacted(store: LedgerStore) -> int:
    lid = store.topic("t").compacted_ledger_id()
    assert lid is not None
    return lid


def open_store(path: Path) -> LedgerStore:
    return LedgerStore(path, ServerSettings(topic_defaults={}))


@pytest.fixture
def data_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)
        gc.collect()


def fill(
    store: LedgerStore, head: list[list[tuple[bytes | None, bytes | None]]], slow: bool = False
) -> None:
    """A topic compacted into batches of 3 (keyless records retained); ``slow``: with a
    compacted subscription at the start, so the run keeps its tombstones."""
    store.create_topic("t", {"ledger.max.entries": "4", "compaction.retain.null.key": "true"})
    if slow:
        store.open_cursor("t", "slow", read_compacted=True)
    store.append("t", [Record(b"a", b"0"), Record(None, b"x"), Record(b"f", b"0")])
    for batch in head:
        store.append("t", [Record(k, v) for k, v in batch])
    with mock.patch.object(compactor_module, "APPEND_BATCH", 3):
        TwoPhaseCompactor(LedgerStoreCompactionStorage(store), 1 << 20).compact("t")


def drop_digests(store: LedgerStore, lid: int) -> None:
    batch = Batch()
    batch.delete_range(*keys.digest_range(lid))
    store.db.write(batch)


@settings(max_examples=20, deadline=None)
@given(head=BATCHES, tail=BATCHES, slow=st.booleans())
def test_a_view_with_stored_digests_equals_one_without(
    head: list[list[tuple[bytes | None, bytes | None]]],
    tail: list[list[tuple[bytes | None, bytes | None]]],
    slow: bool,
) -> None:
    """Past the horizon, for every id of the tail: the same bytes with the digests and
    after they are deleted (keyless and tombstone records in the compacted ledger too,
    with a slow compacted subscription keeping its tombstones)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp))
        try:
            fill(store, head, slow)
            ids = [i for b in tail for i in store.append("t", [Record(k, v) for k, v in b])]
            lid = compacted(store)
            assert list(store.digest_records(lid))  # the run stored them
            points = [store.topic("t").lac or EARLIEST, *ids]
            with_digests = [view_bytes(store, at) for at in points]
            drop_digests(store, lid)
            assert not list(store.digest_records(lid))
            assert [view_bytes(store, at) for at in points] == with_digests
        finally:
            store.close()


def test_a_damaged_digest_record_is_detected_and_not_used(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A record whose bytes changed (CRC), one of another batch (its batch's CRC), one
    missing: the view is the same (their batches are hashed), the first damage is logged,
    and ``compactlog check`` names each; a ledger with none at all is only a note."""
    store = open_store(data_dir / LEDGERS_DIR)
    fill(store, [[(b"b", b"1"), (b"c", b"1")], [(b"d", b"1"), (b"e", b"1")], [(b"g", b"1")]])
    lac = store.append("t", [Record(b"a", b"9"), Record(b"c", b"9")])[-1]
    lid = compacted(store)
    records = list(store.digest_records(lid))
    batches = list(store.batches(lid))
    assert [at for at, _r in records] == [at for at, _d, _h in batches] and len(records) >= 3
    for at, data, header in batches:  # each checks against its batch: the merge uses it
        assert StoredDigests(store, lid).of(at, data, header.count) is not None
    want = view_bytes(store, lac)
    (p0, r0), (p1, _r1), (p2, _r2) = records[:3]
    store.db.put(keys.digest_key(lid, p0), r0[:-1] + bytes([r0[-1] ^ 1]))  # a bit flipped
    store.db.put(keys.digest_key(lid, p1), r0)  # the first batch's record
    gone = Batch()
    gone.delete(keys.digest_key(lid, p2))
    store.db.write(gone)
    with caplog.at_level(logging.WARNING):
        assert view_bytes(store, lac) == want
    assert "digest record CRC-32C mismatch" in caplog.text
    store.close()
    report = check_data_dir(data_dir)
    where = f"topic 't' ledger {lid}"
    assert f"{where} key digests at {p0}: digest record CRC-32C mismatch" in report.problems
    assert f"{where} key digests at {p1}: the digest record is not its batch's" in report.problems
    assert any(
        p.startswith(f"{where} entry {p2}: the batch has no key digests") for p in report.problems
    )
    assert len(report.problems) == 3
    store = open_store(data_dir / LEDGERS_DIR)
    drop_digests(store, lid)
    store.close()
    report = check_data_dir(data_dir)
    assert report.ok and any(n.startswith(f"{where}: no key digests") for n in report.notes)


def test_digest_records_go_with_their_ledger(data_dir: Path) -> None:
    """The next run's ledger has its own; the replaced ledger's are deleted with it."""
    store = open_store(data_dir / LEDGERS_DIR)
    fill(store, [[(b"b", b"1")]])
    first = compacted(store)
    assert list(store.digest_records(first))
    store.append("t", [Record(b"b", b"2")])
    TwoPhaseCompactor(LedgerStoreCompactionStorage(store), 1 << 20).compact("t")
    assert compacted(store) != first and list(store.digest_records(compacted(store)))
    assert not list(store.digest_records(first))
    store.close()
    assert check_data_dir(data_dir).ok
