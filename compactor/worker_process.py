"""A compaction worker process: ``python -m compactlog.compactor.worker_process FD PARENT``.

Started by ``workers.WorkerPool`` with one end of a socket pair as descriptor ``FD``. It
lowers its priority, arranges to die with the server (``worker_os``), keeps the heap its
jobs free (``compactlog.malloc_tuning``), then runs the jobs it is sent one at a time
until the server closes the pipe. A job's error goes back as ``Failed`` and the worker
takes the next job; only a crash (or the server's kill, for a job that ignores a cancel)
ends it early. The secondary instance of the server's store that LEDGER jobs keep open
between them (``worker_job.metered_secondary``) is closed after ``IDLE_S`` without a job,
so that it does not hold deleted files of the store open.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from compactlog.compactor.two_phase.worker_job import SECONDARY, drop_secondary
from compactlog.compactor.worker_cores import confine_self
from compactlog.compactor.worker_link import CANCEL, Done, Failed, WorkerLink, portable
from compactlog.compactor.worker_os import die_with_parent, lower_priority
from compactlog.malloc_tuning import keep_freed_memory

# The modules of the jobs a worker runs (both designs'): a job's unpickling would import
# them, and the first job would wait for it.
# A secondary kept between jobs is closed after this long without one (tests shorten it).
IDLE_S = float(os.environ.get("COMPACTLOG_WORKER_IDLE_S", "30"))
JOB_MODULES = (
    "compactlog.compactor.log_cleaner.worker_pass",
    "compactlog.compactor.two_phase.worker_job",
)


def serve(conn: Connection) -> int:
    cache: dict[Any, Any] = {}
    while True:
        try:
            if SECONDARY in cache and not conn.poll(IDLE_S):
                drop_secondary(cache)  # it holds the store's files open, deleted ones too
                continue
            job = conn.recv()
        except (EOFError, OSError):  # the server closed the pipe or died
            return 0
        if job == CANCEL:  # for a job that already ended
            continue
        link = WorkerLink(conn, cache)
        try:
            value = job.run(link)
            link.flush()
            conn.send(Done(value))
        except (EOFError, BrokenPipeError):
            return 0
        except BaseException as exc:
            conn.send(Failed(portable(exc), traceback.format_exc()))


def main(argv: list[str]) -> int:
    fd, parent = int(argv[0]), int(argv[1])
    confine_self(argv[2] if len(argv) > 2 else "")  # first, with the priority: the
    lower_priority()  # threads started from here on inherit both
    die_with_parent(parent)
    keep_freed_memory()  # before any job allocates (compactlog.malloc_tuning)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the server's to handle
    logging.basicConfig(
        level=os.environ.get("COMPACTLOG_LOG_LEVEL", "INFO"),
        format=f"%(asctime)s %(levelname)s worker-{os.getpid()} %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for module in JOB_MODULES:  # now, while no job waits for them
        importlib.import_module(module)
    return serve(Connection(fd))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
