"""``segments.manifest``: what each sealed segment of a log held when it was sealed.

Kafka keeps no such record, so a sealed segment emptied, cut short or deleted while the
broker was down reads back as a shorter log. Here every sealed segment has an entry,
written (``state_file``: a checksum line, then ``atomic_write``) when a segment is sealed
(roll), replaced (a cleaner swap), deleted (retention, DeleteRecords) or reconciled at
start; never per append. Each line carries its own CRC-32C too::

    segments-manifest 1
    <base> <last offset> <size> <batches> <max timestamp> <crc32c of the line before it>
    swap <base> <last> <size> <batches> <max ts> replaces <b1>,<b2>,... <crc32c>
    #crc32c:<8 hex digits>                          (state_file's trailer)

The active segment is never listed. A ``swap`` line is written before a cleaner swap's
first rename, so a crash anywhere in the swap leaves files that match either the old
entries or the swap line (``sealed.py`` decides which); the next write drops it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import crc32c

from compactlog.errors import CompactlogError
from compactlog.storage.segmented import state_file
from compactlog.storage.segmented.manifest_check import Figures
from compactlog.storage.segmented.state_file import BadStateFile

if TYPE_CHECKING:
    from compactlog.storage.segmented.segment import LogSegment

log = logging.getLogger(__name__)

MANIFEST_FILE = "segments.manifest"
_HEADER = "segments-manifest 1"


@dataclass(frozen=True)
class PendingSwap:
    """A cleaner swap under way: ``figures`` of the cleaned segment, the bases it replaces."""

    figures: Figures
    replaces: tuple[int, ...]


def figures_of(seg: LogSegment) -> Figures:
    """A segment's figures now (its batches counted by a scan when not known)."""
    batches = seg.batch_count
    if batches is None:
        batches = sum(1 for _ in seg.batches(0, seg.size))
        seg.batch_count = batches
    last = max(seg.next_offset, seg.base_offset) - 1
    return Figures(seg.base_offset, last, seg.size, batches, seg.max_timestamp)


def _signed(text: str) -> str:
    return f"{text} {crc32c.crc32c(text.encode()):08x}"


def _fields(f: Figures) -> str:
    return f"{f.base} {f.last} {f.size} {f.batches} {f.max_ts}"


def encode(entries: dict[int, Figures], swap: PendingSwap | None) -> bytes:
    lines = [_HEADER] + [_signed(_fields(entries[b])) for b in sorted(entries)]
    if swap is not None:
        bases = ",".join(str(b) for b in swap.replaces)
        lines.append(_signed(f"swap {_fields(swap.figures)} replaces {bases}"))
    return ("\n".join(lines) + "\n").encode()


def _figures(words: list[str]) -> Figures:
    base, last, size, batches, max_ts = (int(w) for w in words)
    if base < 0 or last < base - 1 or size < 0 or batches < 0:
        raise ValueError("figures out of range")
    return Figures(base, last, size, batches, max_ts)


def decode(path: Path, body: bytes) -> tuple[dict[int, Figures], PendingSwap | None]:
    """Entries and pending swap of a checked body; ``BadStateFile`` on anything else."""
    lines = body.decode("ascii", errors="replace").splitlines()
    if lines[:1] != [_HEADER]:
        raise BadStateFile(path, "not a segments manifest of version 1")
    entries: dict[int, Figures] = {}
    swap = None
    for number, line in enumerate(lines[1:], 2):
        text, _, crc = line.rpartition(" ")
        try:
            if f"{crc32c.crc32c(text.encode()):08x}" != crc:
                raise ValueError("entry checksum mismatch")
            words = text.split(" ")
            if words[0] == "swap" and swap is None and len(words) == 8 and words[6] == "replaces":
                replaces = tuple(int(b) for b in words[7].split(","))
                swap = PendingSwap(_figures(words[1:6]), replaces)
                continue
            figures = _figures(words)
            if figures.base in entries or (entries and figures.base <= max(entries)):
                raise ValueError("entries out of order")
            entries[figures.base] = figures
        except ValueError as exc:
            raise BadStateFile(path, f"line {number}: {exc}") from None
    return entries, swap


class SegmentManifest:
    """The manifest of one log directory, in memory and on disk. ``entries`` is None when
    no manifest is in force (one could not be built: ``sealed.py`` logged why); then the
    changes below write nothing."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / MANIFEST_FILE
        self.entries: dict[int, Figures] | None = None
        self.swap: PendingSwap | None = None
        self.problem: str | None = None  # why the file on disk could not be used
        self.found = False  # a file was there (even a damaged one)
        self._unsaved = False

    @classmethod
    def load(cls, directory: Path) -> SegmentManifest:
        """Read the file; a damaged one is set aside (logged) and noted in ``problem``."""
        manifest = cls(directory)
        try:
            body = state_file.read(manifest.path)
            manifest.found = body is not None
            if body is not None:
                manifest.entries, manifest.swap = decode(manifest.path, body)
        except BadStateFile as exc:
            manifest.problem = str(exc)
            state_file.set_aside(manifest.path, str(exc))
        return manifest

    def end(self) -> int:
        """The offset after the last one the manifest lists (every offset below it was
        synced when its segment was sealed)."""
        return max((f.last + 1 for f in (self.entries or {}).values()), default=0)

    def save(self) -> None:
        """Write the manifest now; our error (DISK_FULL, …) when it cannot be."""
        if self.entries is not None:
            state_file.write(self.path, encode(self.entries, self.swap))
            self._unsaved = False

    def save_or_log(self, doing: str) -> None:
        """Write it, or log why not and try again at the next change: until then the file
        lists fewer segments, which start-up takes for new ones and checks (never for lost)."""
        try:
            self.save()
        except CompactlogError as exc:
            self._unsaved = True
            log.warning("%s not written after %s (tried again later): %s", self.path, doing, exc)

    def save_if_unsaved(self) -> None:
        if self._unsaved:
            self.save_or_log("a change it missed")

    def seal(self, seg: LogSegment) -> None:
        """A segment stopped being the active one (roll)."""
        if self.entries is not None:
            self.entries[seg.base_offset] = figures_of(seg)
            self.save_or_log(f"sealing segment {seg.base_offset}")

    def remove(self, segments: list[LogSegment]) -> None:
        """Segments retention or DeleteRecords dropped (the log start is already past them)."""
        if self.entries is not None:
            for seg in segments:
                self.entries.pop(seg.base_offset, None)
            self.save_or_log("deleting segments")

    def begin_swap(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Record the swap about to happen; raises (nothing changed) when it cannot be."""
        if self.entries is not None:
            self.swap = PendingSwap(figures_of(new), tuple(s.base_offset for s in old))
            try:
                self.save()
            except CompactlogError:
                self.swap = None
                raise

    def commit_swap(self, new: LogSegment | None, old: list[LogSegment]) -> None:
        """The swap is done: ``new`` (None: dropped, it kept nothing) replaces ``old``; the
        file is written by the next save."""
        if self.entries is not None:
            for seg in old:
                self.entries.pop(seg.base_offset, None)
            if new is not None:
                self.entries[new.base_offset] = figures_of(new)
            self.swap = None
            # Not written now: the file still names the swap as pending, which start-up
            # settles as done from the files (``sealed._settle_swap``), as after a crash
            # between the renames and this write. The pass's next ``begin_swap`` or its
            # end (``LogSwaps.save_swaps``) writes both at once: one synced manifest write
            # per swap instead of two.
            self._unsaved = True
