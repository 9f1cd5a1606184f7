"""Joining the groups of a pass whose survivors fit one ``.cleaned`` segment.

``group_segments_by_size`` groups segments by their input size, as Kafka's cleaner does, so
that a group's output surely fits one segment. On a log's first pass, when most records
are superseded, that leaves one group per segment (each input segment is near
``segment.bytes``) and one ``.cleaned`` segment, one swap and its synced manifest writes
per segment, for outputs a tenth of a segment each. ``joined`` writes the next group into
the same ``.cleaned`` segment when its survivors are known to fit beside what is there:
it holds the group's survivors (at most ``HOLD_BYTES`` of them, never more than the room
left) and joins the group when all of them came within the room, else starts the next
output with them. The bound is counted from the survivors themselves (their bytes plus a
header each, one index entry each), so a preview and a pass join the same groups.

Only a log that is compacted alone joins: retention (``compact,delete``) drops whole
segments, and a joined one would keep the older group's records as long as the newer's.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

from compactlog.storage.batch import HEADER_SIZE, BatchHeader
from compactlog.storage.segmented import LogSegment

HOLD_BYTES = 16 << 20  # survivors held at most while deciding whether a group joins
INDEX_ENTRY_BYTES = 12  # a time index entry (an offset index entry takes 8)
MAX_RELATIVE = 2**32 - 1  # offsets of a segment stay within 32 bits of its base

# Survivors of one batch: (record bytes, count, first offset, last offset, horizon)
Survivors = tuple[list[bytes], int, int, int, int]
# A batch of the rewrite: its survivors (None: none), header, (records, keyless dropped,
# tombstones removed)
Survived = tuple[Survivors | None, BatchHeader, tuple[int, int, int]]
# A group of segments, the last offset it holds, and its batches' survivors in order
Unit = tuple[list[LogSegment], int, Iterator[Survived]]
# One ``.cleaned`` segment's groups (a list that grows while its batches are taken)
Output = tuple[list[LogSegment], Iterator[Survived]]


def _bound(item: Survived) -> int:
    """The most bytes a batch's survivors take in the output (a header of their own)."""
    kept = item[0]
    return 0 if kept is None else sum(len(p) for p in kept[0]) + HEADER_SIZE


class _Budget:
    """What one output holds so far, counted from the survivors that went in."""

    def __init__(self, max_bytes: int, max_index_bytes: int, base: int) -> None:
        self.base = base
        self.bytes_left = max_bytes
        # every output batch holds survivors of at least one source batch: one entry each
        self.entries_left = max_index_bytes // INDEX_ENTRY_BYTES - 1

    def take(self, item: Survived) -> Survived:
        if item[0] is not None:
            self.bytes_left -= _bound(item)
            self.entries_left -= 1
        return item

    def hold(self, items: Iterator[Survived], last: int) -> tuple[list[Survived], bool]:
        """``items`` taken while they fit; with them, whether they all did."""
        if last - self.base > MAX_RELATIVE:
            return [], False
        held: list[Survived] = []
        room, entries, nbytes = min(self.bytes_left, HOLD_BYTES), self.entries_left, 0
        for item in items:
            held.append(item)
            if item[0] is not None:
                nbytes += _bound(item)
                entries -= 1
                if nbytes > room or entries < 0:
                    return held, False
        return held, True


def joined(
    units: Iterator[Unit], max_bytes: int, max_index_bytes: int, join: bool = True
) -> Iterator[Output]:
    """The outputs of ``units`` (groups in log order): each its groups' segments and their
    survivors, a group joining the output before it when its survivors fit there (never
    when not ``join``). The segment list of an output is complete once its survivors were
    all taken."""
    if not join:
        yield from ((segments, items) for segments, _last, items in units)
        return
    head = next(units, None)
    while head is not None:
        segments, _last, items = head
        budget = _Budget(max_bytes, max_index_bytes, segments[0].base_offset)
        group = list(segments)
        nxt: list[Unit | None] = [None]

        def survivors(
            items: Iterator[Survived] = items,
            budget: _Budget = budget,
            group: list[LogSegment] = group,
            nxt: list[Unit | None] = nxt,
        ) -> Iterator[Survived]:
            yield from map(budget.take, items)
            for unit in units:
                held, fits = budget.hold(unit[2], unit[1])
                if not fits:
                    nxt[0] = (unit[0], unit[1], chain(held, unit[2]))
                    return
                group.extend(unit[0])
                yield from map(budget.take, held)

        yield group, survivors()
        head = nxt[0]
