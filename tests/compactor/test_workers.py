"""The worker pool with real processes: progress, requests, errors, cancel, crashes,
priorities, and the workers' death with their server."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from compactlog.compactor.progress import LocalRunControl, RunCancelled
from compactlog.compactor.worker_os import IOPRIO_CLASS_IDLE, NICE
from compactlog.compactor.worker_probe import ProbeAnswer, ProbeJob
from compactlog.compactor.workers import WorkerCrashed, WorkerPool, _alive
from compactlog.errors import DiskFull, InvalidArgument, StorageUnavailable, TopicNotFound


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    made = WorkerPool(2)
    yield made
    made.close()


def echo(body: object) -> object:
    if body == "missing":
        raise TopicNotFound("topic 'missing' does not exist")
    return ("echo", body)


def run(pool: WorkerPool, job: ProbeJob, control: LocalRunControl | None = None) -> ProbeAnswer:
    answer = pool.run(job, echo, control or LocalRunControl(), "the probe")
    assert isinstance(answer, ProbeAnswer)
    return answer


def test_a_job_runs_in_a_lower_priority_child_that_is_reused(pool: WorkerPool) -> None:
    control = LocalRunControl()
    first = run(pool, ProbeJob(reports=3, question="hi"), control)
    assert first.pid != os.getpid() and first.parent == os.getpid()
    assert first.reply == ("echo", "hi")
    assert first.nice >= os.nice(0) + NICE or first.nice == 19
    if first.io_priority is not None:
        assert first.io_priority[0] == IOPRIO_CLASS_IDLE
    # a run's pool threads (fanout) have the worker's standing: nice, I/O class, cores
    assert first.threads and all(
        t == (first.nice, first.io_priority, first.cores) for t in first.threads
    )
    progress = control.snapshot()
    assert (progress.phase, progress.done, progress.total) == ("probe", 3, 3)
    assert run(pool, ProbeJob()).pid == first.pid  # kept for the next job
    assert pool.pids() == [first.pid]


@pytest.mark.skipif(
    not hasattr(ctypes.CDLL(ctypes.util.find_library("c")), "gnu_get_libc_version"),
    reason="the heap's thresholds are glibc's",
)
def test_a_worker_keeps_the_heap_its_jobs_free(pool: WorkerPool) -> None:
    # 16 MiB in 1 MiB blocks, written, freed, then again: glibc's own thresholds gave
    # those pages back and the second round faulted in about 4,100 of them again
    answer = run(pool, ProbeJob(churn_mib=16))
    assert 0 <= answer.refaults < 16 * 256 // 8


def test_warm_starts_every_worker_before_any_run_and_runs_use_them(pool: WorkerPool) -> None:
    pool.warm()
    started = pool.pids()
    assert len(started) == 2
    pool.warm()  # the pool is full: nothing more starts
    assert pool.pids() == started
    both = {run(pool, ProbeJob()).pid for _ in range(4)}
    assert both <= set(started) and pool.pids() == started
    for pid in started:  # idle workers that die (the OOM killer, say) fail no run
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not all(dead(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.02)
    fresh = run(pool, ProbeJob()).pid
    assert fresh not in started and pool.pids() == [fresh]


def dead(pid: int) -> bool:
    """Exited: gone, or a zombie its parent has not reaped yet (``/proc/PID/stat``)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


THREADED_CHILD = (
    "import threading, time\n"
    "for _ in range(8):\n"
    "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_a_killed_worker_is_dead_while_its_threads_still_exit() -> None:
    """A process with threads is reaped only when all of them have exited; its main
    thread is a zombie before that, and ``poll()`` still says it runs. The pool must not
    hand such a worker a job (CI once did: the run failed with WorkerCrashed)."""
    for _ in range(20):
        proc = subprocess.Popen([sys.executable, "-c", THREADED_CHILD], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline() == b"ready\n"
            assert _alive(proc)
            os.kill(proc.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while not dead(proc.pid) and time.monotonic() < deadline:
                pass
            assert not _alive(proc)
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()


def test_errors_travel_back_as_themselves_and_the_worker_lives_on(pool: WorkerPool) -> None:
    with pytest.raises(InvalidArgument, match="boom"):
        run(pool, ProbeJob(fail="boom"))
    with pytest.raises(TopicNotFound, match="missing"):  # the server's answer, in the worker
        run(pool, ProbeJob(question="missing"))
    assert len(pool.pids()) == 1


def test_a_jobs_os_error_answers_its_reason_and_the_worker_lives_on(pool: WorkerPool) -> None:
    """A write the job could not make (the worker's own OSError) is the job's failure with
    the reason CONTRACT section 11 names, never a broken pipe that kills the worker."""
    started = time.monotonic()
    with pytest.raises(StorageUnavailable) as refused:
        run(pool, ProbeJob(fail_errno=errno.EACCES))
    assert refused.value.metadata == {"path": "/probe/file", "errno": "EACCES"}
    with pytest.raises(DiskFull):
        run(pool, ProbeJob(fail_errno=errno.ENOSPC))
    assert len(pool.pids()) == 1 and time.monotonic() - started < 5


def test_cancel_stops_the_job(pool: WorkerPool) -> None:
    control = LocalRunControl()
    threading.Timer(0.2, control.cancel).start()
    started = time.monotonic()
    with pytest.raises(RunCancelled):
        run(pool, ProbeJob(sleep_s=30), control)
    assert time.monotonic() - started < 5
    assert run(pool, ProbeJob()).pid in pool.pids()  # the same worker takes the next job


def test_a_killed_worker_fails_the_run_naming_it(pool: WorkerPool) -> None:
    control = LocalRunControl()
    pids: list[int] = []

    def kill() -> None:
        # Once the job has reported its phase: a kill before that (the worker still
        # starting, as on a slow box) is the start's crash, named "its start".
        deadline = time.monotonic() + 60
        while control.snapshot().phase != "probe" and time.monotonic() < deadline:
            time.sleep(0.01)
        pids.extend(pool.pids())
        os.kill(pids[0], signal.SIGKILL)

    threading.Thread(target=kill).start()
    with pytest.raises(WorkerCrashed) as info:
        run(pool, ProbeJob(reports=1, sleep_s=30), control)
    message = str(info.value)
    assert f"pid {pids[0]}" in message and "SIGKILL" in message and "probe" in message
    assert "during the probe (phase probe)" in message, message  # the run named once
    assert pids[0] not in pool.pids()
    assert run(pool, ProbeJob()).pid != pids[0]  # a fresh worker replaces it


def test_jobs_beyond_the_pool_size_wait_for_a_worker() -> None:
    pool = WorkerPool(1)
    try:
        answers: list[ProbeAnswer] = []
        threads = [
            threading.Thread(target=lambda: answers.append(run(pool, ProbeJob(sleep_s=0.3))))
            for _ in range(3)
        ]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert time.monotonic() - started >= 0.9
        assert len({a.pid for a in answers}) == 1
    finally:
        pool.close()


def test_close_ends_every_worker(pool: WorkerPool) -> None:
    pid = run(pool, ProbeJob()).pid
    pool.close()
    assert pool.pids() == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


PARENT = """
import sys, time
from compactlog.compactor.progress import LocalRunControl
from compactlog.compactor.worker_probe import ProbeJob
from compactlog.compactor.workers import WorkerPool
pool = WorkerPool(1)
threading = __import__("threading")
threading.Thread(target=pool.run, args=(ProbeJob(sleep_s=60), lambda b: b,
                 LocalRunControl(), "probe"), daemon=True).start()
while not pool.pids():
    time.sleep(0.01)
print(pool.pids()[0], flush=True)
time.sleep(60)
"""


def test_a_worker_dies_with_its_server() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    os.kill(worker, 0)  # alive
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
    pytest.fail(f"worker {worker} outlived its parent")
