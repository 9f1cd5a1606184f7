"""Finishing a pass's ``.cleaned`` segments (sync, then swap) behind the next one's writing.

Each ``.cleaned`` segment a pass writes is finished before it replaces its group: its
files are synced, then it is swapped in (``Cleaner.clean_segments``). In a compaction
worker the swap is a request the server answers (``worker_pass``: a synced manifest
write, the renames), so the pass's one thread stood still for every segment's fsyncs and
swap: at 1M records, 3 outputs, 10-30 ms each of a pass of 170-250 ms. ``Finisher``
runs one segment's finishing on a thread of its own while the pass goes on writing the
next one, one at a time and in the pass's order: a segment's finishing starts only after
the previous one's ended, and the pass ends only once the last one did. What a crash
leaves is what it left before, plus at most the next ``.cleaned`` segment being written,
which the server and start-up recovery remove as they remove any: every segment is still
synced before its swap, and the swaps come in the same order.

Inline (``background=False``), each finishing runs at once on the caller's thread: a pass
in the server's process, whose swaps change the log its reads walk.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

from compactlog.storage.segmented import LogSegment
from compactlog.storage.segmented.segment import CLEANED


class Finisher:
    """One finishing step at a time, in order; behind the caller when ``background``."""

    def __init__(self, background: bool) -> None:
        self._pool = (
            ThreadPoolExecutor(1, thread_name_prefix="cleaned-finish") if background else None
        )
        self._last: Future[None] | None = None

    def submit(self, finish: Callable[[], None]) -> None:
        """Run ``finish`` once the previous one ended (its error raised here, and
        ``finish`` then not run)."""
        self.wait()
        if self._pool is None:
            finish()
        else:
            self._last = self._pool.submit(finish)

    def wait(self) -> None:
        """Until the step in flight ended; its error raised here."""
        last, self._last = self._last, None
        if last is not None:
            last.result()

    def __enter__(self) -> Finisher:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Waits for the step in flight (nothing outlives the pass); its error is raised
        only when the pass itself did not fail."""
        try:
            if kind is None:
                self.wait()
            else:
                last, self._last = self._last, None
                if last is not None:
                    last.exception()  # waits; the pass's own error is the one that counts
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)


def discard(cleaned: LogSegment) -> None:
    """Remove a ``.cleaned`` segment that will not be swapped in (none once it was)."""
    if cleaned.suffix == CLEANED:
        cleaned.close_index_files()
        for path in (cleaned.path(ext) for ext in (".log", ".index", ".timeindex")):
            path.unlink(missing_ok=True)
