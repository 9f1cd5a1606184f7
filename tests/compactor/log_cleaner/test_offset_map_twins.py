"""The offset map's compiled twin against its pure-Python twin: the same digests, the same
answers and byte-identical tables after any sequence of operations."""

from __future__ import annotations

import os
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.compactor.log_cleaner import _offset_map_py, offset_map
from compactlog.compactor.log_cleaner.offset_map import FULL, NEW, SkimpyOffsetMap

compiled = pytest.importorskip("compactlog.compactor.log_cleaner._offset_map")
TWINS = [_offset_map_py, compiled]


def test_the_compiled_twin_is_the_one_in_use() -> None:
    if os.environ.get("COMPACTLOG_NO_EXT") == "1":  # the pure twin, as without a compiler
        assert not offset_map.COMPILED and offset_map.twin is _offset_map_py
    else:
        assert offset_map.COMPILED and offset_map.twin is compiled


# SipHash-2-4-128 reference vectors (Aumasson and Bernstein): key 00 01 .. 0f, message
# 00 01 .. (n - 1), for the message lengths that cross the 8-byte word boundaries.
SIPHASH_VECTORS = {
    0: "a3817f04ba25a8e66df67214c7550293",
    1: "da87c1d86b99af44347659119b22fc45",
    7: "a1f1ebbed8dbc153c0b84aa61ff08239",
    8: "3b62a9ba6258f5610f83e264f31497b4",
    15: "5493e99933b0a8117e08ec0f97cfc3d9",
    16: "6ee2a4ca67b054bbfd3315bf85230577",
    63: "5150d1772f50834a503e069a973fbd7c",
}


@pytest.mark.parametrize("n", sorted(SIPHASH_VECTORS))
def test_siphash_matches_the_reference_vectors(n: int) -> None:
    key, message = bytes(range(16)), bytes(range(n))
    expected = bytes.fromhex(SIPHASH_VECTORS[n])
    assert compiled.siphash128(key, message) == expected
    assert _offset_map_py.siphash128(key, message) == expected


@given(st.binary(min_size=0, max_size=300))
def test_twins_digest_keys_alike_under_the_maps_key(key: bytes) -> None:
    digest = _offset_map_py.siphash128(_offset_map_py.DIGEST_KEY, key)
    assert compiled.digest(key) == _offset_map_py.digest(key) == digest
    assert offset_map.key_digest(key) == digest


def test_a_siphash_key_is_sixteen_bytes() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        compiled.siphash128(b"short", b"data")


def table(slots: int) -> tuple[bytearray, array[int]]:
    return bytearray(16 * slots), array("q", [0]) * slots


def prime_at_least(n: int) -> int:
    """The map's tables have a prime number of slots (double hashing then visits every
    slot); a composite size can leave a probe sequence without a free slot."""
    while any(n % d == 0 for d in range(2, int(n**0.5) + 1)):
        n += 1
    return n


OPS = st.lists(
    st.tuples(st.sampled_from(["x", "g"]), st.binary(max_size=6), st.integers(0, 2**40)),
    max_size=60,
)


@settings(max_examples=200)
@given(slots=st.sampled_from([1, 2, 3, 7, 13, 101]), ops=OPS, cap=st.integers(0, 110))
def test_twins_answer_alike_and_leave_identical_tables(
    slots: int, ops: list[tuple[str, bytes, int]], cap: int
) -> None:
    tables = [table(slots) for _ in TWINS]
    sizes = [0, 0]
    for op, key, value in ops:
        answers = []
        for i, twin in enumerate(TWINS):
            hashes, offsets = tables[i]
            if op == "x":
                answer = twin.exchange(hashes, offsets, key, value, sizes[i] < cap)
                sizes[i] += answer == NEW
            else:
                answer = twin.get(hashes, offsets, key)
            answers.append(answer)
        assert answers[0] == answers[1]
        assert tables[0] == tables[1]
    bigger = [table(prime_at_least(2 * slots + 1)) for _ in TWINS]
    moved = [twin.rehash(*tables[i], *bigger[i]) for i, twin in enumerate(TWINS)]
    assert moved[0] == moved[1] == sizes[0] and bigger[0] == bigger[1]


def test_exchange_reports_new_previous_and_full() -> None:
    m = SkimpyOffsetMap(24 * 3, 0.9)  # 3 slots, 2 entries
    assert m.exchange(b"a", 5) == NEW and m.exchange(b"a", 9) == 5
    assert m.exchange(b"b", 1) == NEW and m.exchange(b"c", 2) == FULL
    assert (m.get(b"a"), m.get(b"c"), m.size) == (9, -1, 2)
    assert m.resize(24 * 7) and m.slots == 7 and m.size == 2
    assert (
        m.exchange(b"c", 2) == NEW
        and m.get(b"a") == 9
        and m.get_hash(offset_map.key_digest(b"b")) == 1
    )  # the cleaner's digest methods see the same table
    assert not m.resize(24 * 7)


def test_fit_sizes_the_table_to_the_pass_within_the_budget() -> None:
    m = SkimpyOffsetMap(24 * 100_003, 0.9)
    assert m.slots == m.budget_slots
    m.fit(1000)  # 1000 keys cannot fill the budget: a table just large enough
    assert int(m.fit_slots * 0.9) >= 1000 and m.fit_slots < m.budget_slots and m.size == 0
    for i in range(1000):
        assert m.put(b"k%d" % i, i)
    assert m.slots <= m.fit_slots
    assert m.utilization == 1000 / m.budget_slots  # of the budget, as Kafka reports it
    m.fit(10**9)  # more than the budget holds: the budget's table, cleared in place
    assert m.slots == m.budget_slots and m.size == 0 and m.get(b"k1") == -1
    assert m.put(b"k1", 5) and m.get(b"k1") == 5
    m.fit(10)
    assert m.get(b"k1") == -1 and m.memory_bytes <= 24 * 100_003


def test_a_fitted_map_starts_small_and_grows_to_its_keys_not_its_offsets() -> None:
    m = SkimpyOffsetMap(128 * 1024 * 1024, 0.9, lazy=True)
    m.fit(1_000_000)  # a pass of 1M offsets: at most 1M keys
    assert m.fit_slots > 1_000_000 and m.slots <= m.fit_slots // 32
    for i in range(100_000):
        assert m.put(b"key-%d" % (i % 20_000), i)
    assert m.size == 20_000 and m.slots <= m.fit_slots // 8  # sized by its 20k keys
    assert all(m.get(b"key-%d" % k) == 80_000 + k for k in range(20_000))
    kept = m.slots
    m.fit(1_000_000)  # a worker's next pass of that size: the grown table, cleared
    assert m.slots == kept and m.size == 0 and m.get(b"key-1") == -1


def test_a_map_whose_table_twice_over_the_budget_cannot_hold_fills_as_before() -> None:
    m = SkimpyOffsetMap(24 * 10_007, 0.9, lazy=True)
    m.fit(6_000)  # its table, 6,673 slots, twice over is past the budget: taken whole
    assert m.slots == m.fit_slots == 6_673
    m.fit(10**9)  # more than the budget holds: the budget's table, filled to its end
    assert m.slots == m.budget_slots
    assert all(m.put(b"k%d" % i, i) for i in range(m.max_entries))
    assert not m.put(b"one more", 1)
