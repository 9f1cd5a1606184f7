"""GetKeyHistory over LEDGER topics: the key index kept by the append path, merged by
the KeyIndexer, deleted with its ledgers, rebuilt for stores written before it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.errors import TopicNotFound
from compactlog.storage import batch as codec
from compactlog.storage import key_index, keys
from compactlog.storage.config import ServerSettings
from compactlog.storage.key_history import ledger_history, scanned_history
from compactlog.storage.ledger_log import LedgerTopicLog
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record

Model = list[tuple[MessageId, bytes | None, bytes | None]]


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[[], LedgerStore]]:
    opened: list[LedgerStore] = []

    def make() -> LedgerStore:
        for old in opened:
            old.close()
        opened.clear()
        store = LedgerStore(tmp_path / "db", ServerSettings(topic_defaults={}))
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def history(store: LedgerStore, topic: str, key: bytes, limit: int = 0) -> Model:
    found = ledger_history(store, topic, key, limit)
    decoded = [codec.decode_message(r) for r in found.records]
    return [(m.id, m.key, m.value) for m in decoded]


def expected(model: Model, key: bytes) -> Model:
    return [m for m in model if m[1] == key]


def publish(
    store: LedgerStore, topic: str, model: Model, pairs: list[tuple[bytes | None, bytes | None]]
) -> None:
    ids = store.append(topic, [Record(k, v) for k, v in pairs])
    model += [(i, k, v) for i, (k, v) in zip(ids, pairs, strict=True)]


def test_history_of_a_key_oldest_first_with_tombstones(
    open_store: Callable[[], LedgerStore],
) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "4"})
    model: Model = []
    publish(store, "t", model, [(b"a", b"1"), (b"b", b"2"), (None, b"x"), (b"a", None)])
    publish(store, "t", model, [(b"a", b""), (b"c", b"3"), (b"a", b"4")])
    assert history(store, "t", b"a") == expected(model, b"a")
    assert [v for _i, _k, v in history(store, "t", b"a")] == [b"1", None, b"", b"4"]
    assert history(store, "t", b"a", limit=2) == expected(model, b"a")[:2]
    assert ledger_history(store, "t", b"a", 2).truncated
    assert not ledger_history(store, "t", b"a").truncated
    assert history(store, "t", b"zz") == []
    with pytest.raises(TopicNotFound):
        ledger_history(store, "nope", b"a")


def test_a_hash_collision_never_returns_another_key(
    open_store: Callable[[], LedgerStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    store.create_topic("t", {})
    model: Model = []
    publish(store, "t", model, [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")])
    # every key hashes alike, as a worst-case collision would
    b_entries = key_index.lookup(store.db, 1, key_index.key_hash(b"b"))
    monkeypatch.setattr(key_index, "lookup", lambda db, lid, h: [0, 1, 2])
    assert history(store, "t", b"a") == expected(model, b"a")
    assert b_entries == [1]


def test_index_goes_with_retention_and_topic_delete(open_store: Callable[[], LedgerStore]) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "2", "retention.bytes": "1"})
    model: Model = []
    publish(store, "t", model, [(b"k", b"%d" % i) for i in range(5)])
    assert store.enforce_retention("t") == [1, 2]
    assert history(store, "t", b"k") == [m for m in model if m[0].ledger_id == 3]
    assert list(store.db.scan_keys(*keys.key_index_range(1))) == []
    store.delete_topic("t")
    assert list(store.db.scan_keys(*keys.key_index_all())) == []


@pytest.mark.parametrize("blocks, chunk", [(4, 3), (64, 512)])
def test_merges_keep_every_entry_and_end_as_one_run(
    open_store: Callable[[], LedgerStore], monkeypatch: pytest.MonkeyPatch, blocks: int, chunk: int
) -> None:
    monkeypatch.setattr(key_index, "BLOCKS_BEFORE_MERGE", blocks)
    monkeypatch.setattr(key_index, "CHUNK_ENTRIES", chunk)
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "5000"})
    model: Model = []
    for n in range(60):
        publish(store, "t", model, [(b"k%d" % (i % 37), b"%d" % n) for i in range(n % 7 + 1)])
        store.key_indexer.drain()
    shape = key_index.shape(store.db, 1)
    assert len(shape.blocks) < blocks and len(shape.runs) <= 8
    assert store.key_indexer.merges > (0 if blocks < 60 else -1)
    for k in range(37):
        assert history(store, "t", b"k%d" % k) == expected(model, b"k%d" % k)
    store = open_store()  # reopened: the ledger is sealed and merges into one run
    store.key_indexer.drain()
    shape = key_index.shape(store.db, 1)
    assert (len(shape.blocks), len(shape.runs)) == (0, 1)
    for k in range(37):
        assert history(store, "t", b"k%d" % k) == expected(model, b"k%d" % k)


def test_a_store_written_before_the_index_gets_one_at_start(
    open_store: Callable[[], LedgerStore],
) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "3"})
    model: Model = []
    publish(store, "t", model, [(b"a", b"%d" % i) for i in range(7)])
    store.key_indexer.close()  # nothing merges while the index is removed
    store.db.write(_without_index(store))
    store = open_store()
    assert history(store, "t", b"a") == expected(model, b"a")


def _without_index(store: LedgerStore):  # type: ignore[no-untyped-def]
    from compactlog.storage.rocks import Batch

    batch = Batch()
    batch.delete_range(*keys.key_index_all())
    batch.delete(keys.KEY_INDEX_KEY)
    return batch


KEYS = st.sampled_from([b"a", b"b", b"c", b""]) | st.none()
VALUES = st.sampled_from([b"v", b"", b"w"]) | st.none()
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=6)),
        st.tuples(st.just("merge"), st.none()),
        st.tuples(st.just("retention"), st.none()),
        st.tuples(st.just("reopen"), st.none()),
    ),
    max_size=14,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(OPS)
def test_history_equals_the_model_for_random_sequences(
    open_store: Callable[[], LedgerStore], ops: list[tuple[str, object]]
) -> None:
    store = open_store()
    if store.has_topic("t"):
        store.delete_topic("t")
    store.create_topic("t", {"ledger.max.entries": "4", "retention.bytes": "1"})
    model: Model = []
    for op, arg in ops:
        if op == "publish":
            publish(store, "t", model, arg)  # type: ignore[arg-type]
        elif op == "merge":
            store.key_indexer.drain()
        elif op == "retention":
            store.enforce_retention("t")
            held = {led.ledger_id for led in store.topic("t").ledgers}
            model[:] = [m for m in model if m[0].ledger_id in held]
        else:
            store = open_store()
    for key in [b"a", b"b", b"c", b""]:
        want = expected(model, key)
        assert history(store, "t", key) == want
        scanned = scanned_history(LedgerTopicLog(store, "t"), key).records
        assert [codec.decode_message(r).id for r in scanned] == [m[0] for m in want]


def test_the_indexer_merges_on_its_own_once_appends_pause(
    open_store: Callable[[], LedgerStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(key_index, "BLOCKS_BEFORE_MERGE", 4)
    store = open_store()
    store.create_topic("t", {})
    model: Model = []
    for n in range(6):
        publish(store, "t", model, [(b"k", b"%d" % n), (b"j", b"%d" % n)])
    deadline = time.monotonic() + 10
    while key_index.shape(store.db, 1).blocks and time.monotonic() < deadline:
        time.sleep(0.02)
    shape = key_index.shape(store.db, 1)
    assert (len(shape.blocks), len(shape.runs)) == (0, 1)
    assert history(store, "t", b"k") == expected(model, b"k")


def test_an_answer_stops_before_the_response_cap() -> None:
    from compactlog.storage.key_history import KeyHistory
    from compactlog.storage.read_range import MAX_RESPONSE_BYTES

    found = KeyHistory()
    big = b"x" * (MAX_RESPONSE_BYTES // 3)
    assert found.add(big, 0) and found.add(big, 0) and found.add(big, 0)
    assert not found.add(big, 0) and found.truncated and len(found.records) == 3
    alone = KeyHistory()
    assert alone.add(b"y" * (MAX_RESPONSE_BYTES + 1), 0)  # one message alone may exceed it
