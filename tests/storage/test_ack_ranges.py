"""Acked ranges alone (``storage.ack_ranges``), against a model: ids added one by one or
as runs stay merged and replay the same from the changes a store persists, a mark drops
exactly what is at or before it, and a lookup from another thread sees whole changes.
The cursors that hold them are in test_cursor.py."""

from __future__ import annotations

import itertools
import sys
import threading

from hypothesis import given
from hypothesis import strategies as st

from compactlog.storage.ack_ranges import AckedRanges, RangeChanges
from compactlog.storage.cursor import Cursor
from compactlog.storage.types import MessageId


def ids_of(ranges: AckedRanges) -> set[MessageId]:
    return {
        MessageId(start.ledger_id, entry)
        for start, end in ranges
        for entry in range(start.entry_id, end.entry_id + 1)
    }


# ---- the ranges alone ------------------------------------------------------------------


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 20)), max_size=60))
def test_ranges_hold_exactly_the_ids_added_and_stay_merged(added: list[tuple[int, int]]) -> None:
    ranges = AckedRanges()
    replayed = AckedRanges()
    model: set[MessageId] = set()
    for ledger, entry in added:
        msg_id = MessageId(ledger, entry)
        changes: RangeChanges = {}
        assert ranges.add(msg_id, changes) == (msg_id not in model)
        model.add(msg_id)
        for start, end in changes.items():  # what a store persists, replayed elsewhere
            if end is None:
                replayed.remove(start)
            else:
                replayed.put(start, end)
        assert ids_of(ranges) == model and list(replayed) == list(ranges)
        assert all(i in ranges for i in model)
    spans = list(ranges)
    for (_s1, e1), (s2, _e2) in itertools.pairwise(spans):
        assert e1 < s2 and not (e1.ledger_id == s2.ledger_id and e1.entry_id + 1 == s2.entry_id)


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 20), st.integers(0, 6)), max_size=30))
def test_runs_merge_with_every_range_they_overlap_or_touch(
    added: list[tuple[int, int, int]],
) -> None:
    ranges = AckedRanges()
    replayed = AckedRanges()
    model: set[MessageId] = set()
    for ledger, entry, length in added:
        run = {MessageId(ledger, e) for e in range(entry, entry + length + 1)}
        changes: RangeChanges = {}
        start, end = MessageId(ledger, entry), MessageId(ledger, entry + length)
        assert ranges.add_run(start, end, changes) == bool(run - model)
        model |= run
        for first, last in changes.items():
            if last is None:
                replayed.remove(first)
            else:
                replayed.put(first, last)
        assert ids_of(ranges) == model and list(replayed) == list(ranges)
    for (_s1, e1), (s2, _e2) in itertools.pairwise(list(ranges)):
        assert e1 < s2 and not (e1.ledger_id == s2.ledger_id and e1.entry_id + 1 == s2.entry_id)


def test_a_list_in_order_is_one_range_change_not_one_an_id() -> None:
    cursor = Cursor("s")
    cursor.deliver(MessageId(1, 999))
    first = lambda mark: MessageId(1, 0) if mark is None else None  # noqa: E731
    change = cursor.acknowledge_list([MessageId(1, e) for e in range(500, 1000)], first)
    assert change.ranges == {MessageId(1, 500): MessageId(1, 999)}
    ids = [MessageId(1, e) for e in reversed(range(500))] + [MessageId(1, 3)]  # any order
    change = cursor.acknowledge_list(ids, first)
    assert cursor.mark_delete == MessageId(1, 999) and not cursor.acked
    assert change.head and change.ranges == {MessageId(1, 0): None, MessageId(1, 500): None}


@given(
    st.lists(st.integers(0, 40), max_size=40),
    st.lists(st.integers(0, 40), max_size=5),
)
def test_dropping_through_a_mark_forgets_exactly_what_is_at_or_before_it(
    added: list[int], marks: list[int]
) -> None:
    ranges = AckedRanges()
    model = set()
    for entry in added:
        ranges.add(MessageId(1, entry), {})
        model.add(entry)
    for mark in sorted(marks):
        ranges.drop_through(MessageId(1, mark), {})
        model = {e for e in model if e > mark}
        assert ids_of(ranges) == {MessageId(1, e) for e in model}


def test_lookups_from_another_thread_see_whole_changes() -> None:
    """A delivery step asks ``in`` from a storage thread while acks change the ranges
    (merging two, dropping through the mark): a lookup never sees half a change."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    ranges = AckedRanges()
    failures: list[BaseException] = []
    done = threading.Event()

    def look() -> None:
        try:
            while not done.is_set():
                for entry in range(0, 2000, 7):
                    _ = MessageId(1, entry) in ranges
        except BaseException as exc:  # reported below
            failures.append(exc)

    reader = threading.Thread(target=look)
    reader.start()
    try:
        for _ in range(3):
            for entry in [*range(1, 2000, 2), *range(0, 2000, 2)]:  # holes, then filled
                ranges.add(MessageId(1, entry), {})
            ranges.drop_through(MessageId(1, 1999), {})
    finally:
        done.set()
        reader.join()
        sys.setswitchinterval(interval)
    assert not failures, failures[0]
