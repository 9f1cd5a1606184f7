"""What a sealed segment should hold against what it holds: the one comparison that start-up
(``sealed.py``) and ``compactlog check`` (``check.py``) both make, and the lost range it
leaves a segment with.

``Figures`` are a sealed segment's base offset, last offset, size in bytes, batch count
and largest timestamp: what ``segments.manifest`` records when the segment is sealed, and
what is found in its file later (the batch count only where the whole file was scanned).
A file that is gone, shorter, or ends at a lower offset than its figures say has lost
records: damage that *removes* data (CONTRACT section 11), which a CRC cannot see. Its
offsets are never served as a shorter answer: a read that reaches them fails
``DATA_LOSS`` / ``CORRUPT_DATA`` naming the topic, the file and the lost offsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compactlog.errors import CorruptData


@dataclass(frozen=True)
class Figures:
    base: int
    last: int  # base - 1 for a segment without records
    size: int
    batches: int | None  # None: not counted (the file was not scanned)
    max_ts: int

    def offsets(self) -> str:
        return f"offsets {self.base}-{self.last}" if self.last >= self.base else "no records"


@dataclass(frozen=True)
class Mismatch:
    """How a sealed segment differs from its manifest entry; ``lost`` is the offset range
    it no longer holds (None when nothing is lost: a file that grew, say)."""

    what: str
    lost: tuple[int, int] | None

    def describe(self) -> str:
        if self.lost is None:
            return self.what
        return f"{self.what}: offsets {self.lost[0]}-{self.lost[1]} are lost"


def missing(expected: Figures) -> Mismatch:
    """A sealed segment whose file is gone."""
    whole = (expected.base, expected.last) if expected.last >= expected.base else None
    return Mismatch(
        f"missing; the manifest lists it with {expected.offsets()}, "
        f"{expected.batches} batches, {expected.size} bytes",
        whole,
    )


def compare(expected: Figures, found: Figures | None, damaged: bool = False) -> Mismatch | None:
    """None when ``found`` bears ``expected`` out; else what is wrong (``found`` None: the
    file is gone). ``damaged``: a batch of the file fails its check, so ``found`` stops
    there; at the sealed size that is bytes changed, not removed, and the CRC error that
    every read of it meets already says so."""
    if found is None:
        return missing(expected)
    if damaged and found.size == expected.size:
        return None
    lost = (found.last + 1, expected.last) if found.last < expected.last else None
    said = f"the manifest says {expected.size} bytes, last offset {expected.last}"
    if expected.batches is not None and found.batches is not None:
        said += f", {expected.batches} batches"
    holds = f"{found.size} bytes, " + (
        f"last offset {found.last}" if found.last >= found.base else "no records"
    )
    if found.batches is not None:
        holds += f", {found.batches} batches"
    if found.size < expected.size:
        return Mismatch(f"cut short: {holds}; {said}", lost)
    counted = expected.batches is not None and found.batches is not None
    if found.size > expected.size:
        return Mismatch(f"longer than sealed: {holds}; {said}", lost)
    if (
        lost is not None
        or found.last != expected.last
        or (counted and found.batches != expected.batches)
    ):
        return Mismatch(f"differs from its manifest entry: {holds}; {said}", lost)
    return None


@dataclass(frozen=True)
class LostRange:
    """Offsets ``first``..``last`` of a segment that its file no longer holds; its
    readable bytes end at ``position``."""

    first: int
    last: int
    position: int
    cause: str

    def error(self, topic: str, path: Path) -> CorruptData:
        where = f"topic {topic}, segment {path.name}"
        return CorruptData(
            f"{where}: offsets {self.first}-{self.last} are lost ({self.cause})",
            topic=topic,
            path=str(path),
            position=f"{where}, byte {self.position}",
            first_offset=self.first,
            last_offset=self.last,
        )
