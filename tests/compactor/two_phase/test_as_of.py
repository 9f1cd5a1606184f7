"""Reading the past (``as_of``): for random publish sequences (keys, tombstones, keyless
records) and every id, the view equals latest-per-key of the raw history up to that id —
before any compaction, and with a compaction committed in between, ``as_of`` before and
after its horizon."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.compactor.two_phase import TwoPhaseCompactor, phase_one
from compactlog.compactor.two_phase.as_of import (
    AsOfTooLarge,
    AsOfView,
    as_of_messages,
    last_at_or_before,
)
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.storage import batch as codec
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record

Entry = tuple[MessageId, bytes | None, bytes | None]
KEYS = st.sampled_from([b"a", b"b", b"c", b"d", None])
VALUES = st.sampled_from([b"1", b"22", b"", None])
EARLIEST = MessageId(0, 0)
BATCHES = st.lists(st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=5), max_size=8)


def expected(history: list[Entry], as_of: MessageId, retain: bool) -> list[Entry]:
    """Latest per key up to ``as_of``; a tombstone (null or empty value) removes its key."""
    upto = [e for e in history if e[0] <= as_of]
    last = {key: i for i, (_id, key, _v) in enumerate(upto) if key is not None}
    return [
        e
        for i, e in enumerate(upto)
        if (e[1] is None and retain) or (e[1] is not None and last[e[1]] == i and e[2])
    ]


def read_as_of(
    store: LedgerStore, topic: str, as_of: MessageId, start: MessageId = EARLIEST
) -> list[Entry]:
    return [(m.id, m.key, m.value) for m in as_of_messages(store, topic, as_of, 1 << 20, start)]


@pytest.fixture
def store() -> Iterator[LedgerStore]:
    with tempfile.TemporaryDirectory() as tmp:
        s = LedgerStore(Path(tmp) / "ledgers", ServerSettings(topic_defaults={}))
        yield s
        s.close()


def _run(
    batches: list[list[tuple[bytes | None, bytes | None]]],
    retain: bool,
    compact_after: int,
    slow_reader: bool = False,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = LedgerStore(Path(tmp) / "ledgers", ServerSettings(topic_defaults={}))
        try:
            store.create_topic(
                "t", {"ledger.max.entries": "3", "compaction.retain.null.key": str(retain).lower()}
            )
            if slow_reader:  # a compacted subscription at the start: runs keep tombstones
                store.open_cursor("t", "slow", read_compacted=True)
            history: list[Entry] = []
            for n, batch in enumerate(batches):
                if n == compact_after:
                    TwoPhaseCompactor(LedgerStoreCompactionStorage(store), 1 << 20).compact("t")
                ids = store.append("t", [Record(k, v) for k, v in batch])
                history += [(i, k, v) for i, (k, v) in zip(ids, batch, strict=True)]
            points = [e[0] for e in history] + [MessageId(0, 0), MessageId(99, 99)]
            for as_of in points:
                want = expected(history, as_of, retain)
                assert read_as_of(store, "t", as_of) == want, as_of
            if history:
                mid = history[len(history) // 2][0]
                got = read_as_of(store, "t", history[-1][0], start=mid)
                assert got == [e for e in expected(history, history[-1][0], retain) if e[0] >= mid]
        finally:
            store.close()


@settings(max_examples=40, deadline=None)
@given(batches=BATCHES, retain=st.booleans())
def test_as_of_equals_latest_per_key_without_compaction(
    batches: list[list[tuple[bytes | None, bytes | None]]], retain: bool
) -> None:
    _run(batches, retain, compact_after=-1)


@settings(max_examples=40, deadline=None)
@given(batches=BATCHES, retain=st.booleans(), at=st.integers(0, 8), slow=st.booleans())
def test_as_of_equals_latest_per_key_around_a_compaction(
    batches: list[list[tuple[bytes | None, bytes | None]]], retain: bool, at: int, slow: bool
) -> None:
    """A compaction committed after ``at`` batches: ids before its horizon read the raw
    ledgers, ids at or after it the compacted ledger and the raw tail. With a slow
    compacted subscription the compacted ledger keeps its tombstones; no past view shows
    them."""
    _run(batches, retain, min(at, len(batches) - 1) if batches else -1, slow)


def test_as_of_after_two_compactions_reads_the_compacted_ledger(store: LedgerStore) -> None:
    store.create_topic("t", {"ledger.max.entries": "2"})
    compactor = TwoPhaseCompactor(LedgerStoreCompactionStorage(store), 1 << 20)
    a1, b1 = store.append("t", [Record(b"a", b"1"), Record(b"b", b"1")])
    compactor.compact("t")
    (a2,) = store.append("t", [Record(b"a", b"2")])
    compactor.compact("t")
    (b_gone, c1) = store.append("t", [Record(b"b", None), Record(b"c", b"1")])
    assert [e[0] for e in read_as_of(store, "t", b1)] == [a1, b1]
    assert [e[0] for e in read_as_of(store, "t", a2)] == [b1, a2]
    assert [e[0] for e in read_as_of(store, "t", c1)] == [a2, c1]
    assert [e[0] for e in read_as_of(store, "t", b_gone)] == [a2]


def test_last_at_or_before_a_time(store: LedgerStore) -> None:
    store.create_topic("t", {"ledger.max.entries": "1"})
    ids = [store.append("t", [Record(b"k", str(n).encode())])[0] for n in range(3)]
    times = [store.find_by_timestamp("t", 0)]
    assert times[0] == ids[0]
    first_ms = store.batch_at(ids[0].ledger_id, 0)
    assert first_ms is not None
    t0 = first_ms[2].publish_time_ms
    assert last_at_or_before(store, "t", t0 - 1) is None
    assert last_at_or_before(store, "t", t0) is not None
    assert last_at_or_before(store, "t", 1 << 60) == ids[-1]


def test_a_view_whose_keys_do_not_fit_is_refused(store: LedgerStore) -> None:
    store.create_topic("t", {})
    store.append("t", [Record(str(n).encode(), b"v") for n in range(200)])
    view = AsOfView(store, "t", MessageId(99, 0), 1024)
    stop = view.visible_end()
    assert stop is not None
    with pytest.raises(AsOfTooLarge):
        list(view.batches(MessageId(0, 0), stop, True))


def test_compacted_batches_say_when_they_hold_only_live_keyed_messages(
    store: LedgerStore,
) -> None:
    """A past view at the horizon splices such batches without walking them."""
    store.create_topic("t", {"compaction.retain.null.key": "true"})
    store.append("t", [Record(b"a", b"1"), Record(b"a", b"2")])
    TwoPhaseCompactor(LedgerStoreCompactionStorage(store), 1 << 20).compact("t")
    lid = store.topic("t").compacted_ledger_id()
    assert lid is not None
    found = store.batch_at(lid, 0)
    assert found is not None and found[2].attributes & codec.LIVE_ONLY
    store.append("t", [Record(None, b"x")])
    TwoPhaseCompactor(LedgerStoreCompactionStorage(store), 1 << 20).compact("t")
    lid = store.topic("t").compacted_ledger_id()
    assert lid is not None
    found = store.batch_at(lid, 0)
    assert found is not None and not found[2].attributes & codec.LIVE_ONLY


@pytest.mark.parametrize("keys", [100, 4093, 5000, 9973])
def test_a_tail_over_the_compacted_ledger_s_keys_is_mapped_without_growing(
    store: LedgerStore, keys: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the horizon the tail's map starts with room for the tail's messages, up to
    the compacted ledger's keys: a tail that updates every key maps them with no doubling
    (each would allocate a table and rehash into it)."""
    store.create_topic("t", {})
    store.append("t", [Record(b"k%d" % i, b"old") for i in range(keys)])
    TwoPhaseCompactor(LedgerStoreCompactionStorage(store), 1 << 24).compact("t")
    store.append("t", [Record(b"k%d" % i, b"new") for i in reversed(range(keys))])
    grown: list[int] = []
    original = phase_one._GrowingMap.grow

    def counted(self: phase_one._GrowingMap) -> bool:
        grown.append(self.map.size)
        return original(self)

    monkeypatch.setattr(phase_one._GrowingMap, "grow", counted)
    lac = store.topic("t").lac
    assert lac is not None
    view = read_as_of(store, "t", lac)
    assert [(key, value) for _id, key, value in view] == [
        (b"k%d" % i, b"new") for i in reversed(range(keys))
    ]
    assert grown == []


def test_a_map_sized_for_n_keys_holds_n_keys() -> None:
    """The table rounds its slots down to a prime; the room asked for covers that."""
    for n in [*range(1, 3000, 7), 99_991, 100_000, 1_000_003]:
        grown = phase_one._GrowingMap(1 << 40, n)
        assert grown.map.max_entries >= n, n
