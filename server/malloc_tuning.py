"""What glibc's malloc keeps of freed memory in a served process.

A Read answers with responses of up to 4 MiB (typically a stored batch, ~140 KB), built on
an executor thread and freed on the event loop's once gRPC has copied them: a whole
topic's worth of bytes allocated and freed again, a step of 2 MiB at a time. glibc's
defaults fit that badly. A block over the mmap threshold (128 KiB until its dynamic rule
raises it) is mapped and unmapped alone, and an arena whose free top passes the trim
threshold (twice that) gives it back to the kernel at once; the next step then faults
every page in afresh, zero-filled. Measured on a served raw Read of 1M records (1,000
responses of ~140 KB, `/proc/PID/stat` minor faults): 40,000 faults a read in some
servers, about one fresh page for every 4 KiB sent, against 0-600 once the memory stays.

``keep_freed_memory`` fixes both thresholds (which also turns off glibc's dynamic rule):
blocks up to ``MMAP_THRESHOLD`` come from the arenas, and an arena keeps up to
``TRIM_THRESHOLD`` free at its top for the next step. That is the same tuning as
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` in the environment, set by the
process itself so that every way of starting a server gets it. On a libc without
``mallopt`` (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt's parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

# Above the largest response (storage.read_range.MAX_RESPONSE_BYTES, 4 MiB) and a Read
# step's bytes (server.log.reading.STEP_BYTES): those come from the arenas. glibc caps
# the mmap threshold at 32 MiB on 64-bit.
MMAP_THRESHOLD = 8 * 1024 * 1024
# An arena keeps this much free at its top: several steps of several readers.
TRIM_THRESHOLD = 32 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Set the thresholds (once, at start); False where the libc has no ``mallopt``."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
