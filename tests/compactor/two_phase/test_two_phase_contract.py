"""The CompactionStorage contract, run over the in-memory twin and the RocksDB adapter."""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.compactor.two_phase.storage import Segment
from compactlog.errors import CommitConflict, CompactlogError, TopicNotFound
from compactlog.storage.codec import HAS_KEY, VALUE_NON_EMPTY, VALUE_PRESENT
from compactlog.storage.types import MessageId, Record


def keyed(n: int, prefix: bytes = b"v") -> list[Record]:
    return [Record(b"k%d" % (i % 3), prefix + b"%d" % i) for i in range(n)]


def test_begin_on_empty_topic_has_nothing_to_do(harness: Any) -> None:
    harness.create_topic("t")
    inp = harness.storage.begin("t")
    assert inp.nothing_to_do and inp.segments == () and inp.previous_ledger is None


def test_unknown_topic_is_not_found(harness: Any) -> None:
    with pytest.raises(TopicNotFound):
        harness.storage.begin("nope")


def test_begin_covers_raw_ledgers_up_to_the_lac(harness: Any) -> None:
    harness.create_topic("t")
    ids = harness.publish("t", keyed(10))
    inp = harness.storage.begin("t")
    assert inp.horizon == ids[-1] and not inp.nothing_to_do
    covered = [
        MessageId(s.ledger_id, e)
        for s in inp.segments
        for e in range(s.first_entry, s.last_entry + 1)
    ]
    assert covered == ids and not any(s.compacted for s in inp.segments)


def test_read_keys_forward_and_reverse_without_payloads(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish(
        "t", [Record(b"a", b"1"), Record(None, b"2"), Record(b"b", None), Record(b"c", b"")]
    )
    seg = harness.storage.begin("t").segments[0]
    forward = list(harness.storage.read_keys(seg))
    assert [(e, f, k) for e, f, _s, k in forward] == [
        (0, HAS_KEY | VALUE_PRESENT | VALUE_NON_EMPTY, b"a"),
        (1, VALUE_PRESENT | VALUE_NON_EMPTY, None),
        (2, HAS_KEY, b"b"),
        (3, HAS_KEY | VALUE_PRESENT, b"c"),
    ]
    assert all(size > 0 for _e, _f, size, _k in forward)
    assert list(harness.storage.read_keys(seg, reverse=True)) == forward[::-1]


def test_read_entries_selects_by_bitmap(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish("t", keyed(4))
    seg = harness.storage.begin("t").segments[0]
    every = list(harness.storage.read_entries(seg))
    assert [e for e, _ in every] == [0, 1, 2, 3]
    picked = list(harness.storage.read_entries(seg, bytearray([0b1010])))
    assert picked == [every[1], every[3]]


def test_partial_segment_reads_only_its_range(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish("t", keyed(4))
    lid = harness.storage.begin("t").segments[0].ledger_id
    seg = Segment(lid, 1, 2, False)
    assert [e for e, *_ in harness.storage.read_keys(seg, reverse=True)] == [2, 1]
    assert [e for e, _ in harness.storage.read_entries(seg, bytearray([0b11]))] == [1, 2]


def test_ledger_write_seal_commit_and_next_begin(harness: Any) -> None:
    harness.create_topic("t")
    ids = harness.publish("t", keyed(3))
    st = harness.storage
    lid = st.create_ledger("t")
    st.append(lid, [(0, b"\x0a\x02\x08\x01\x12\x01k", b"k", HAS_KEY)])
    st.seal(lid)
    with pytest.raises(CompactlogError):
        st.append(lid, [(1, b"x", None, 0)])
    st.commit("t", lid, ids[-1], None)
    inp = st.begin("t")
    assert inp.previous_ledger == lid and inp.previous_horizon == ids[-1] and inp.nothing_to_do
    assert inp.segments == (Segment(lid, 0, 0, True),)
    more = harness.publish("t", keyed(2))
    inp = st.begin("t")
    assert inp.horizon == more[-1] and [s.compacted for s in inp.segments] == [True, False, False]


def test_commit_refuses_a_stale_base(harness: Any) -> None:
    harness.create_topic("t")
    ids = harness.publish("t", keyed(2))
    st = harness.storage
    first, second = st.create_ledger("t"), st.create_ledger("t")
    st.seal(first)
    st.seal(second)
    st.commit("t", first, ids[-1], None)
    with pytest.raises(CommitConflict):
        st.commit("t", second, ids[-1], None)
    st.commit("t", second, ids[-1], first)


def test_delete_ledger_removes_it(harness: Any) -> None:
    harness.create_topic("t")
    lid = harness.storage.create_ledger("t")
    assert lid in harness.ledger_ids()
    harness.storage.delete_ledger(lid)
    assert lid not in harness.ledger_ids()
