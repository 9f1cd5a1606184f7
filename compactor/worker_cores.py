"""Cores of their own for the compaction workers, and the server off them while a run lasts.

A worker at ``nice 10`` still costs the server its tail latency on a machine with few
cores. The worker runs in bursts between short sleeps (its reads, its fsyncs), and a
server thread that wakes on the worker's core waits in that core's run queue behind it,
while another core may be idle, until the next scheduler tick (4 ms). ``perf sched``
showed server threads waiting 2-4.7 ms like this during a cleaner pass (EEVDF, Linux 6.18).
No nice level, ``SCHED_IDLE`` or time slice changed it; keeping the two apart did
(docs/benchmarks.md).

So the workers run on the last ``min(workers, usable - 1)`` of the cores this process
may use (``CoreSplit``). While at least one run is in flight, every thread of the server
steps off those cores, and when the last run ends they get their cores back
(``server_steps_off``). The count of runs in flight is per process. With one usable core,
or ``compaction.worker.own.cores = false``, or on a platform without
``sched_setaffinity``, nothing is pinned. Sharded servers turn it off: each shard's
workers would take the same last cores.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CoreSplit:
    """The cores this process may use, and those its compaction workers run on."""

    usable: frozenset[int]
    workers: frozenset[int]

    @property
    def server(self) -> frozenset[int]:
        """Where the server's threads run while a compaction does."""
        return self.usable - self.workers

    @classmethod
    def plan(cls, workers: int, enabled: bool = True) -> CoreSplit | None:
        """The split for a pool of ``workers`` processes; None when nothing is pinned."""
        if not enabled or not hasattr(os, "sched_setaffinity"):
            return None
        usable = sorted(os.sched_getaffinity(0))
        if len(usable) < 2:
            return None
        taken = usable[-min(max(workers, 1), len(usable) - 1) :]
        return cls(frozenset(usable), frozenset(taken))

    def worker_arg(self) -> str:
        """The workers' cores as a worker process takes them on its command line."""
        return ",".join(str(c) for c in sorted(self.workers))


def confine_self(arg: str) -> None:
    """In a worker, before it starts any thread: run on the cores ``arg`` names."""
    cores = {int(c) for c in arg.split(",") if c}
    if not cores:
        return
    try:
        os.sched_setaffinity(0, cores)
    except OSError as exc:
        log.warning("compaction worker: could not keep to cores %s: %s", arg, exc)


def confine_threads(cores: frozenset[int]) -> None:
    """Every thread of this process onto ``cores`` (threads started later inherit the
    mask of the thread that starts them)."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        with suppress(OSError):  # the thread ended meanwhile
            os.sched_setaffinity(tid, cores)


class _InFlight:
    """Runs in flight in this process, to know when the server steps off and back."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0


_RUNS = _InFlight()


@contextmanager
def server_steps_off(split: CoreSplit | None) -> Iterator[None]:
    """While the block runs (one compaction in a worker), this process's threads stay off
    the workers' cores; after the last such block they get every usable core back."""
    if split is None:
        yield
        return
    with _RUNS.lock:
        _RUNS.count += 1
        if _RUNS.count == 1:
            confine_threads(split.server)
    try:
        yield
    finally:
        with _RUNS.lock:
            _RUNS.count -= 1
            if _RUNS.count == 0:
                confine_threads(split.usable)
