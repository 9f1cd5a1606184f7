"""The ids a subscription acknowledged individually beyond its mark-delete position, as
ranges: Pulsar's ``individualDeletedMessages``.

A range ``[start, end]`` holds consecutive entries of one ledger (``(L, e)``,
``(L, e + 1)`` ...); ranges are disjoint and sorted, and two ranges of one ledger that
touch are merged. Acknowledging in order, or in any order that leaves few holes, keeps
the set to a handful of ranges however many ids it covers. A list of acks (an
AcknowledgeList's) adds each run of consecutive ids as one range (``add_run``): one merge
and one record changed a run, not one an id.

Two sorted lists (starts and ends) are searched with ``bisect``: a lookup or an ack is
O(log n) comparisons in the number of ranges; a range inserted between two others moves
the tail of the lists (a C memmove of pointers). Ranges leave from the front as the
mark-delete position passes them, so the front is a moving ``_head`` index rather than
a ``del list[0]`` each time; the lists are compacted when half of them is dead.

Each change reports the ranges it wrote and removed (``RangeChanges``: start -> end, or
None for a range gone), so that the stores persist the change, not the whole set.

Readers do not hold the topic's lock that acks hold: a delivery step asks ``in`` for each
message from a storage thread while an ack changes the set from another. A change touches
both lists in several steps, so changes and reads hold the set's own lock (a lookup seeing
one list changed and not the other raised IndexError, or answered wrong).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator

from compactlog.storage.types import MessageId

Range = tuple[MessageId, MessageId]
RangeChanges = dict[MessageId, MessageId | None]  # range start -> its end, None: removed


def _follows(end: MessageId, start: MessageId) -> bool:
    """``start`` is the entry right after ``end`` in the same ledger."""
    return end.ledger_id == start.ledger_id and end.entry_id + 1 == start.entry_id


class AckedRanges:
    def __init__(self, ranges: Iterable[Range] = ()) -> None:
        self._starts: list[MessageId] = []
        self._ends: list[MessageId] = []
        self._head = 0  # ranges before it are gone (passed by the mark-delete position)
        self._lock = threading.Lock()
        for start, end in sorted(ranges):
            self.put(start, end)

    # ---- reading ----------------------------------------------------------------------

    def __len__(self) -> int:
        """The number of ranges (not of ids)."""
        return len(self._starts) - self._head

    def __bool__(self) -> bool:
        return len(self._starts) > self._head

    def __contains__(self, msg_id: object) -> bool:
        if not isinstance(msg_id, tuple):
            return False
        with self._lock:
            i = bisect_right(self._starts, msg_id, self._head) - 1
            return i >= self._head and msg_id <= self._ends[i]

    def __iter__(self) -> Iterator[Range]:
        with self._lock:
            return zip(self._starts[self._head :], self._ends[self._head :], strict=True)

    def first(self) -> Range | None:
        with self._lock:
            if self._head == len(self._starts):
                return None
            return self._starts[self._head], self._ends[self._head]

    def ids(self) -> int:
        """How many ids the ranges hold."""
        return sum(e.entry_id - s.entry_id + 1 for s, e in self)

    # ---- changing ---------------------------------------------------------------------

    def add(self, msg_id: MessageId, changes: RangeChanges) -> bool:
        """Add one id, merging with the ranges it touches; False if it was there."""
        return self.add_run(msg_id, msg_id, changes)

    def add_run(self, start: MessageId, end: MessageId, changes: RangeChanges) -> bool:
        """Add the entries ``start`` to ``end`` of one ledger at once, merging with every
        range they overlap or touch; False if all of them were there."""
        with self._lock:
            return self._add_run(start, end, changes)

    def _add_run(self, start: MessageId, end: MessageId, changes: RangeChanges) -> bool:
        starts, ends = self._starts, self._ends
        lo = bisect_right(starts, start, self._head) - 1
        if lo >= self._head and (ends[lo] >= start or _follows(ends[lo], start)):
            if ends[lo] >= end:
                return False  # inside one range already
            start = starts[lo]
        else:
            lo += 1
        hi = lo  # the ranges from ``lo`` to ``hi`` merge with the run
        while hi < len(starts) and (starts[hi] <= end or _follows(end, starts[hi])):
            end = max(end, ends[hi])
            hi += 1
        for gone in starts[lo:hi]:
            changes[gone] = None
        changes[start] = end
        starts[lo:hi] = [start]
        ends[lo:hi] = [end]
        return True

    def put(self, start: MessageId, end: MessageId) -> None:
        """Hold ``[start, end]``, replacing the ranges inside it (loading, replaying)."""
        with self._lock:
            self._put(start, end)

    def _put(self, start: MessageId, end: MessageId) -> None:
        lo = bisect_right(self._starts, start, self._head)
        if lo > self._head and self._starts[lo - 1] == start:
            lo -= 1
        hi = bisect_right(self._starts, end, lo)
        self._starts[lo:hi] = [start]
        self._ends[lo:hi] = [end]

    def remove(self, start: MessageId) -> None:
        """Drop the range that begins at ``start`` (replaying a removal)."""
        with self._lock:
            i = bisect_right(self._starts, start, self._head) - 1
            if i >= self._head and self._starts[i] == start:
                del self._starts[i], self._ends[i]

    def drop_through(self, mark: MessageId, changes: RangeChanges) -> None:
        """Forget every id at or before ``mark`` (the mark-delete position moved there)."""
        with self._lock:
            self._drop_through(mark, changes)

    def _drop_through(self, mark: MessageId, changes: RangeChanges) -> None:
        while self._head < len(self._starts) and self._starts[self._head] <= mark:
            start, end = self._starts[self._head], self._ends[self._head]
            changes[start] = None
            if end > mark:  # the range straddles the mark: its tail stays
                rest = MessageId(end.ledger_id, mark.entry_id + 1)
                self._starts[self._head] = rest
                changes[rest] = end
                break
            self._head += 1
        if self._head and self._head * 2 >= len(self._starts):
            del self._starts[: self._head], self._ends[: self._head]
            self._head = 0
