"""The cleaner's side of a log: swapping a cleaned segment in for the ones it replaces.

``replace_segments`` renames ``.cleaned`` → ``.swap``, the old segments → ``.deleted`` and
the swap to its final name (start-up recovery resolves a crash at any step, Kafka's
rules), with the swap recorded in ``segments.manifest`` before its first rename. A log
with a lost range is never cleaned: a pass would write the loss in for good.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from compactlog.storage.segmented.manifest import SegmentManifest
from compactlog.storage.segmented.segment import SWAP, LogSegment

log = logging.getLogger(__name__)


class CleaningAborted(Exception):
    """The cleaner's swap found the log changed under it (retention, deletion); nothing swapped."""


class LogSwaps:
    """Base of Log: needs its lock, name, segment list, manifest, hooks and deferred deletes."""

    name: str
    manifest: SegmentManifest
    _closed: bool
    _lock: threading.RLock

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        raise NotImplementedError

    def _set_segments(self, segments: Sequence[LogSegment]) -> None:
        raise NotImplementedError

    def run_hook(self, step: str) -> None:
        raise NotImplementedError

    def _async_delete(self, seg: LogSegment) -> None:
        raise NotImplementedError

    def replace_segments(self, new: LogSegment, old: Sequence[LogSegment]) -> None:
        """Swap a ``.cleaned`` segment in for ``old``: ``.swap``, old → ``.deleted``, final
        name; an empty one is then dropped (``_drop_emptied``)."""
        new.verify()  # read back whole: only a segment that passes end to end goes in
        new.close_index_files()
        with self._lock:
            if self._closed or any(s not in self.segments for s in old):
                raise CleaningAborted(f"{self.name}: segments changed during cleaning")
            self.check_nothing_lost(old)
            self.manifest.begin_swap(new, list(old))
            new.rename(SWAP)
            self.run_hook("swapped")
            segs = list(self.segments)
            at = segs.index(old[0])
            segs = [*segs[:at], new, *(s for s in segs[at:] if s not in old)]
            self._set_segments(segs)
            for i, seg in enumerate(old):
                self._async_delete(seg)
                self.run_hook(f"deleted-{i}")
            new.rename("")
            self.run_hook("renamed")
            dropped = new.size == 0 and new is not self.segments[0]
            if dropped:
                self._drop_emptied(new)
            self.manifest.commit_swap(None if dropped else new, list(old))

    def save_swaps(self) -> None:
        """Write the manifest the pass's last swap left unsaved (``commit_swap``): once at
        the end of a pass, not after every swap."""
        with self._lock:
            if not self._closed:
                self.manifest.save_if_unsaved()

    def check_nothing_lost(self, segments: Sequence[LogSegment] | None = None) -> None:
        """``CorruptData`` when a segment (of ``segments``, or of the log) lost offsets: a
        cleaner pass over it would write the loss into the log for good."""
        for seg in self.segments if segments is None else segments:
            if seg.lost is not None:
                raise seg.lost.error(self.name, seg.path())

    def _drop_emptied(self, seg: LogSegment) -> None:
        """A cleaned segment that kept nothing goes at once, as Kafka's cleaner deletes the
        segments it empties; a read of its offsets starts at the next segment. Swapped in
        first and dropped after, so a crash leaves the old segments or an empty one, both
        whole. Never the active segment (never cleaned), nor the first: it holds the log
        start offset, and without it a restart would raise that offset to the next
        segment's base, making reads from the old start OUT_OF_RANGE where they read the
        next survivor before (the next pass that groups it with its neighbour merges it)."""
        self._set_segments([s for s in self.segments if s is not seg])
        self._async_delete(seg)
        log.debug("%s: dropped emptied segment %d", self.name, seg.base_offset)
