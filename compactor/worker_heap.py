"""A compaction worker's heap: what a run frees is kept for what it allocates next.

A cleaner pass allocates and frees buffers of 0.1-1 MiB all the way through: every chunk
it reads (``log.cleaner.io.buffer.size``, 512 KiB), a batch's survivors, an output batch
packed for the ``.cleaned`` segment. glibc's malloc serves a block past its mmap threshold
(128 KiB at start, raised as mapped blocks are freed) with a fresh mapping, and hands the
top of its heap back to the kernel once more than its trim threshold (twice the mmap
threshold) lies free there; either way the next block's pages are faulted in and zeroed
by the kernel again. A fresh worker's first pass over 1M records (140 MB of segments)
took 23,000 minor faults that way, 12,000 of them in the chunk reads, against 7,900 with
the thresholds below (most of those the offset map's own table, taken once): about a
sixth of the pass's CPU (docs/benchmarks.md).

So a worker fixes both thresholds at start (``mallopt``, which also stops glibc moving
them): blocks up to ``MMAP_THRESHOLD`` come from the heap, and up to ``TRIM_THRESHOLD``
of free heap is kept rather than given back. The offset map's table (tens of MiB) is
still a mapping of its own, returned whole when the map is resized; the heap a worker
keeps is at most ``TRIM_THRESHOLD`` beyond what its jobs hold. Best effort: where the C
library is not glibc nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 * 1024 * 1024
TRIM_THRESHOLD = 32 * 1024 * 1024


def keep_freed_heap() -> bool:
    """Fix this process's malloc thresholds (module docstring); False where that could
    not be done (not glibc, or ``mallopt`` refused)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        libc = None
    if libc is None or not hasattr(libc, "gnu_get_libc_version"):
        return False
    done: bool = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    done = libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and done
    if not done:
        log.warning("compaction worker: mallopt refused the heap's thresholds")
    return done
