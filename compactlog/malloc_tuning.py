"""What glibc's malloc keeps of freed memory, in a server and in a compaction worker.

Both processes allocate and free blocks of 0.1-4 MiB all the time: a Read's responses
(up to 4 MiB, typically a stored batch of ~140 KB) built on an executor thread and freed
on the event loop once gRPC has copied them; a cleaner pass's chunk reads
(``log.cleaner.io.buffer.size``, 512 KiB), survivors and output batches. glibc's
defaults fit that badly: a block over the mmap threshold (128 KiB until its dynamic rule
raises it) is mapped and unmapped alone, and an arena whose free top passes the trim
threshold (twice that) gives it back to the kernel at once, so the next block's pages are
faulted in afresh, zero-filled. Measured (minor faults from ``/proc`` and ``getrusage``):
a served raw Read of 1M records took 40,000 faults in some servers, about one fresh page
for every 4 KiB sent, against 0-600 tuned; a fresh worker's first 1M-record cleaner pass
23,000, against 7,900 tuned (most of those the offset map's own table, taken once),
about a sixth of the pass's CPU (docs/benchmarks.md).

``keep_freed_memory`` fixes both thresholds (which also turns off glibc's dynamic rule):
blocks up to ``MMAP_THRESHOLD`` come from the arenas, and an arena keeps up to
``TRIM_THRESHOLD`` free at its top for the next ones. That is the same tuning as
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` in the environment, set by the
process itself so that every way of starting a server or a worker gets it. Larger blocks
(an offset map's table of tens of MiB) are still mappings of their own, returned whole.
On a C library other than glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt's parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

# Above the largest response (storage.read_range.MAX_RESPONSE_BYTES, 4 MiB), a Read
# step's bytes (server.log.reading.STEP_BYTES) and a cleaner pass's buffers: those come
# from the arenas. glibc caps the mmap threshold at 32 MiB on 64-bit.
MMAP_THRESHOLD = 8 * 1024 * 1024
# An arena keeps this much free at its top: several steps of several readers.
TRIM_THRESHOLD = 32 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Set the thresholds (once, at start); False where the C library is not glibc or
    refused them."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    if not hasattr(libc, "gnu_get_libc_version"):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
