"""Which threads of ours a test module left running.

compactlog's non-daemon threads are the workers of its thread pools, named
``PREFIX_N`` after the pool's ``thread_name_prefix`` (``POOLS``; a test keeps that list in
step with the package). A pool that outlives its module belongs to something a test
never closed: a consumer's ack sender, a cleaner's scan pool, an in-process server.
A pool whose owner was dropped unclosed ends when the owner is collected, so garbage is
collected before judging (only when such a thread is there: nothing to pay otherwise),
and each thread gets a moment to finish a shutdown begun without waiting.
"""

from __future__ import annotations

import gc
import re
import threading
import time

# every thread_name_prefix (and Prefetch name) in the package
POOLS = frozenset(
    {
        "ack",
        "append",
        "cleaned-finish",
        "compaction-scan",
        "compactlog-consume",
        "front",
        "rpc",
        "spark-compaction",
        "storage",
    }
)
_WORKER = re.compile(r"(.+)_\d+")
END_S = 5.0  # how long the threads found may take to end


def ours(thread: threading.Thread) -> bool:
    """A non-daemon worker of one of our pools."""
    named = _WORKER.fullmatch(thread.name)
    return not thread.daemon and named is not None and named.group(1) in POOLS


def left_behind(before: set[threading.Thread], end_s: float = END_S) -> list[str]:
    """Names of our non-daemon threads started since ``before`` that still run once
    garbage is collected and they had ``end_s`` to end."""
    new = [t for t in threading.enumerate() if t not in before and ours(t)]
    if not new:
        return []
    gc.collect()
    deadline = time.monotonic() + end_s
    for thread in new:
        thread.join(max(0.0, deadline - time.monotonic()))
    return sorted(t.name for t in new if t.is_alive())
