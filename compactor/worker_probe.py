"""A job that exercises a worker without touching any data: what the pool's own tests run.

It reports progress, asks the server a question, sleeps while honouring a cancel, fails on
request, and answers with what the worker's process looks like from inside (pid, nice
value, I/O priority, cores), so that the pool can be checked end to end with real processes.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from compactlog.compactor.progress import Progress
from compactlog.compactor.worker_link import WorkerLink
from compactlog.compactor.worker_os import io_priority
from compactlog.errors import InvalidArgument


@dataclass(frozen=True)
class ProbeAnswer:
    pid: int
    parent: int
    nice: int
    io_priority: tuple[int, int] | None
    cores: frozenset[int]
    reply: object


@dataclass(frozen=True)
class ProbeJob:
    reports: int = 0
    question: object = None  # sent to the server when not None
    sleep_s: float = 0.0  # in 10 ms steps, checking for a cancel
    fail: str = ""  # raise InvalidArgument(fail)

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
        return ProbeAnswer(
            os.getpid(),
            os.getppid(),
            os.nice(0),
            io_priority(),
            frozenset(os.sched_getaffinity(0)),
            reply,
        )
