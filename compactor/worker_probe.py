"""A job that exercises a worker without touching any data: what the pool's own tests run.

It reports progress, asks the server a question, sleeps while honouring a cancel, fails on
request, and answers with what the worker's process looks like from inside (pid, nice
value, I/O priority, cores, and the pages its heap faults in again:
``compactlog.malloc_tuning``), so that the pool can be checked end to end with real
processes.
The same three are also read on a thread of a run's pool (``fanout``): nice value, I/O
priority and cores belong to each thread on Linux, so a run's threads must inherit them.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass

from compactlog.compactor.log_cleaner.fanout import Fanout
from compactlog.compactor.progress import Progress
from compactlog.compactor.worker_link import WorkerLink
from compactlog.compactor.worker_os import io_priority
from compactlog.errors import InvalidArgument

# (nice value, I/O priority, cores) as the calling thread has them
Standing = tuple[int, tuple[int, int] | None, frozenset[int]]


def standing() -> Standing:
    return os.nice(0), io_priority(), frozenset(os.sched_getaffinity(0))


def _standing_of(_unit: int) -> Iterator[Standing]:
    yield standing()


@dataclass(frozen=True)
class ProbeAnswer:
    pid: int
    parent: int
    nice: int
    io_priority: tuple[int, int] | None
    cores: frozenset[int]
    reply: object
    threads: tuple[Standing, ...] = ()  # as a run's pool threads have them
    refaults: int = -1  # minor page faults of ``churn``'s second round


def churn(mib: int) -> int:
    """Allocate, write and free ``mib`` blocks of 1 MiB twice, as a pass's reads do; the
    minor page faults of the second round (pages the heap had given back)."""
    for _round in range(2):
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        held = [b"x" * (1 << 20) for _ in range(mib)]
        del held
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


@dataclass(frozen=True)
class ProbeJob:
    reports: int = 0
    question: object = None  # sent to the server when not None
    sleep_s: float = 0.0  # in 10 ms steps, checking for a cancel
    fail: str = ""  # raise InvalidArgument(fail)
    fail_errno: int = 0  # raise the OSError of this errno on a file, as a job's write can
    churn_mib: int = 0  # answer ``churn(churn_mib)``

    def run(self, link: WorkerLink) -> ProbeAnswer:
        for i in range(self.reports):
            link.report(Progress("probe", done=i + 1, total=self.reports))
        reply = link.request(self.question) if self.question is not None else None
        deadline = time.monotonic() + self.sleep_s
        while time.monotonic() < deadline:
            link.check()
            time.sleep(0.01)
        if self.fail:
            raise InvalidArgument(self.fail)
        if self.fail_errno:
            raise OSError(self.fail_errno, os.strerror(self.fail_errno), "/probe/file")
        with Fanout(2) as fan:
            threads = tuple(s for r in fan.ordered(_standing_of, range(4)) for s in r)
        nice, io, cores = standing()
        refaults = churn(self.churn_mib) if self.churn_mib else -1
        return ProbeAnswer(os.getpid(), os.getppid(), nice, io, cores, reply, threads, refaults)
