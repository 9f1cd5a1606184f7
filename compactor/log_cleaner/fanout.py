"""Fanout: a compaction's reads and scans on several threads, consumed in log order.

A pass reads every batch twice (the offset map, then the rewrite), and almost all of that
work lets go of the GIL: ``os.pread``, the CRC-32C of each batch and the compiled scans
(``batch_scan.digest_keys`` and ``survivors``). So a pass cuts each segment into pieces
of about ``PIECE_BYTES`` at batch starts the offset index knows (``LogSegment
.split_points``, each checked) and reads and scans pieces on ``threads`` threads, while
the pass's own thread takes their results in log order: it alone fills the offset map
(each key's latest offset wins, so order matters) and writes the ``.cleaned`` segment.

At most ``2 * threads`` pieces are read ahead of the one being taken, so a pass holds a
bounded amount of results (digests are 24 bytes a keyed record; survivors at most a
piece's bytes). With one thread nothing is cut and nothing runs ahead: each segment is
one piece, read lazily batch by batch as the pass takes it, exactly as a single loop
would, which is also how a throttled pass runs (``log.cleaner.io.max.bytes.per
.second`` bounds what is read; reading ahead would not stay under it).

Phase one of a two-phase run uses ``ordered`` too: its units are runs of stored batches
that its own thread reads from RocksDB, and the threads digest them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from itertools import pairwise
from types import TracebackType
from typing import TypeVar

from compactlog.storage.segmented import LogSegment
from compactlog.storage.segmented.scan import Checked

PIECE_BYTES = 4 * 1024 * 1024

R = TypeVar("R")
U = TypeVar("U")


@dataclass(frozen=True)
class Piece:
    """Bytes ``[start, end)`` of a segment, cut at batch starts. ``from_offset`` >= 0:
    the piece begins at the batch holding that offset, which the offset index finds
    (``start`` is then where the search starts from, the index's entry)."""

    seg: LogSegment
    start: int
    end: int
    from_offset: int = -1

    def batches(self, chunk: int) -> Iterator[Checked]:
        if self.from_offset >= 0:
            return self.seg.batches_from(self.from_offset, self.end, chunk)
        return self.seg.batches(self.start, self.end, chunk)


class Fanout:
    """A pass's threads (none but the caller's when ``threads`` is 1)."""

    def __init__(self, threads: int) -> None:
        self.threads = max(1, threads)
        self.piece_bytes = PIECE_BYTES  # read when made, so tests can make pieces small
        self._pool = (
            ThreadPoolExecutor(self.threads, thread_name_prefix="compaction-scan")
            if self.threads > 1
            else None
        )

    def __enter__(self) -> Fanout:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def pieces(self, seg: LogSegment, end: int, from_offset: int = -1) -> list[Piece]:
        """``seg``'s bytes below ``end`` (from the batch holding ``from_offset``, when it
        is past the segment's base) as pieces: one, unless there are threads to share."""
        start = 0
        if from_offset > seg.base_offset and seg.index_trusted:
            start = seg.offset_index.lookup(from_offset)[1]
        first = from_offset if from_offset > seg.base_offset else -1
        if self._pool is None:
            return [Piece(seg, start, end, first)]
        cuts = [start, *seg.split_points(start, end, self.piece_bytes), end]
        return [
            Piece(seg, a, b, first if i == 0 else -1) for i, (a, b) in enumerate(pairwise(cuts))
        ]

    def ordered(
        self, scan: Callable[[U], Iterator[R]], pieces: Iterable[U]
    ) -> Generator[Iterator[R], None, None]:
        """``scan`` of each piece (a ``Piece``, or any unit of work: phase one's are runs
        of stored batches), in order. Threaded, a piece is scanned whole on a thread
        before it is handed back; closing the iterator (the caller stopped or failed)
        cancels the pieces not started and waits for those running, so that no thread
        reads a segment after the pass has let it go. An error of ``pieces`` itself (a
        unit that could not be read) comes after the results of the units before it, as
        it would on one thread: a caller that stops earlier (a full map) never sees it."""
        if self._pool is None:
            for piece in pieces:
                yield scan(piece)
            return
        pool = self._pool
        ahead: deque[Future[list[R]]] = deque()
        units = iter(pieces)
        try:
            while True:
                try:
                    piece = next(units)
                except StopIteration:
                    break
                except Exception:
                    while ahead:
                        yield iter(ahead.popleft().result())
                    raise
                ahead.append(pool.submit(_whole, scan, piece))
                if len(ahead) > 2 * self.threads:
                    yield iter(ahead.popleft().result())
            while ahead:
                yield iter(ahead.popleft().result())
        finally:
            for future in ahead:
                future.cancel()
            wait(ahead)


def _whole(scan: Callable[[U], Iterator[R]], piece: U) -> list[R]:
    return list(scan(piece))


ONE_THREAD = Fanout(1)  # no pool: usable by anyone, at any time
