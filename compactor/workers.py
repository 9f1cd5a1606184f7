"""WorkerPool: compaction and cleaning run in worker processes, never in the server.

A run inside the serving process holds the interpreter for as long as it scans, and every
publish waits its turn (issue 12 measured p99 x20-40 during a run). So the TwoPhaseCompactor's
phases and the LogCleaner's passes run in a pool of ``compaction.workers`` processes
(``worker_process``), started with the server (``warm``, as Kafka starts its cleaner
threads with the broker: the first run does not wait ~0.3 s for a process to start and
import) or else when first needed, kept for the next run, at lower CPU and I/O priority,
dying with the server. The server keeps what must stay in one place: the input
snapshot and the ledger id (allocated before the run, so ids are never reused), the commit
(ingest + cursor, or the segment swap), the cleaner's state machine and checkpoint.

``run`` ships a job to an idle worker and drives it until it ends: progress reports go
into the run's control (``RunControl``: ``WatchCompaction`` reads it), the worker's
requests to ``on_request`` (whose answer or error goes back), and a cancel as a message
(the worker stops at its next check) followed, if it has not stopped after
``CANCEL_GRACE_S``, by SIGKILL. A worker that dies mid-run (kill -9, a crash) makes the
run fail with ``WorkerCrashed`` naming the process, its signal and the phase it was in;
the caller removes what the run left. Every process is started by one long-lived
launcher thread, because ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the
child ends.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Protocol

from compactlog.compactor.progress import Progress, RunCancelled
from compactlog.compactor.worker_cores import CoreSplit, server_steps_off
from compactlog.compactor.worker_link import CANCEL, Done, Failed, Reply, Report, Request, portable
from compactlog.errors import Unavailable

log = logging.getLogger(__name__)

POLL_S = 0.1
CANCEL_GRACE_S = 5.0
CLOSE_GRACE_S = 2.0

OnRequest = Callable[[object], object]


class WorkerCrashed(Unavailable):
    """The worker process running a job died; nothing of the run was kept but what the
    server had already committed."""


class Watched(Protocol):
    """The server's side of a run's control (``progress.LocalRunControl``)."""

    def report(self, progress: Progress) -> None: ...

    @property
    def cancelled(self) -> bool: ...


@dataclass(eq=False)
class _Worker:
    proc: subprocess.Popen[bytes]
    conn: Connection

    @property
    def pid(self) -> int:
        return self.proc.pid


class _Launcher:
    """The one thread that starts worker processes (see the module docstring)."""

    def __init__(self, cores: str) -> None:
        self.cores = cores  # ``CoreSplit.worker_arg``: "" when workers are not pinned
        self._requests: queue.Queue[Future[_Worker] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="compaction-workers", daemon=True)
        self._thread.start()

    def spawn(self) -> _Worker:
        done: Future[_Worker] = Future()
        self._requests.put(done)
        return done.result()

    def stop(self) -> None:
        self._requests.put(None)
        self._thread.join()

    def _loop(self) -> None:
        while (request := self._requests.get()) is not None:
            try:
                request.set_result(self._start(self.cores))
            except BaseException as exc:
                request.set_exception(exc)

    @staticmethod
    def _start(cores: str) -> _Worker:
        ours, theirs = socket.socketpair()
        with theirs:
            fd = theirs.fileno()
            args = [sys.executable, "-m", "compactlog.compactor.worker_process"]
            proc = subprocess.Popen(
                [*args, str(fd), str(os.getpid()), cores],
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
            )
        return _Worker(proc, Connection(ours.detach()))


def _how_it_ended(proc: subprocess.Popen[bytes]) -> str:
    try:
        code = proc.wait(1.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        return "stopped answering (killed)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with status {code}"


_PROC = os.path.isdir("/proc/self")


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    """Whether a worker can still take a job. ``poll()`` alone is not enough: a killed
    process with threads can be reaped only when all of them have exited, and until then
    its main thread is already a zombie (``Z`` in ``/proc/PID/stat``) while ``poll()``
    says it runs (198 times in 200 right after a SIGKILL, measured). Without ``/proc``,
    ``poll()`` is all there is."""
    if proc.poll() is not None:
        return False
    if not _PROC:
        return True
    try:
        with open(f"/proc/{proc.pid}/stat", "rb") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return False
    return stat.rsplit(b")", 1)[-1].split()[:1] not in ([b"Z"], [b"X"])


class WorkerPool:
    """Up to ``size`` worker processes, started on demand; one job each at a time."""

    def __init__(self, size: int, cores: CoreSplit | None = None) -> None:
        self.size = max(1, size)
        self.cores = cores  # workers on cores of their own (``worker_cores``), or None
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._starting = 0
        self._closed = False
        self._launcher: _Launcher | None = None

    def pids(self) -> list[int]:
        with self._cond:
            return sorted(w.pid for w in self._all)

    def warm(self) -> None:
        """Start the pool's workers now (each imports the jobs' code while it waits), so
        the first run starts at once. One that fails to start is logged: a run would
        start one again, and fail with the reason."""
        while True:
            with self._cond:
                if self._closed or len(self._all) + self._starting >= self.size:
                    return
                launcher = self._reserve_start()
            try:
                worker = launcher.spawn()
            except Exception:
                log.exception("a compaction worker did not start")
                self._start_ended(None)
                return
            self._start_ended(worker)
            if not self._keep(worker, True):
                return

    # ---- one run -------------------------------------------------------------------

    def run(self, job: object, on_request: OnRequest, control: Watched, label: str) -> object:
        """Run ``job`` in a worker; its result, or its error raised here."""
        worker = self._acquire(control)
        keep = False
        try:
            with server_steps_off(self.cores):
                value = self._drive(worker, job, on_request, control, label)
            keep = True
            return value
        except WorkerCrashed:
            raise
        except Exception:
            keep = _alive(worker.proc)
            raise
        finally:
            self._keep(worker, keep)

    def _drive(
        self, worker: _Worker, job: object, on_request: OnRequest, control: Watched, label: str
    ) -> object:
        phase = "its start"
        cancel_at: float | None = None
        try:
            worker.conn.send(job)
            while True:
                msg = worker.conn.recv() if worker.conn.poll(POLL_S) else None
                if control.cancelled:
                    if cancel_at is None:
                        cancel_at = time.monotonic()
                        worker.conn.send(CANCEL)
                    elif time.monotonic() - cancel_at > CANCEL_GRACE_S:
                        worker.proc.kill()
                        worker.proc.wait()
                        raise RunCancelled(f"{label} was cancelled (worker {worker.pid} killed)")
                if msg is None:
                    if worker.proc.poll() is not None:
                        raise EOFError
                elif isinstance(msg, Report):
                    phase = msg.progress.phase or phase
                    control.report(msg.progress)
                elif isinstance(msg, Request):
                    worker.conn.send(self._answer(on_request, msg.body))
                elif isinstance(msg, Done):
                    return msg.value
                elif isinstance(msg, Failed):
                    log.debug("%s failed in worker %d:\n%s", label, worker.pid, msg.trace)
                    raise msg.error
        except (EOFError, OSError):  # the pipe broke: the worker is gone, or is made to go
            how = _how_it_ended(worker.proc)
            raise WorkerCrashed(
                f"compaction worker (pid {worker.pid}) {how} during {label} (phase {phase})"
            ) from None

    @staticmethod
    def _answer(on_request: OnRequest, body: object) -> Reply:
        try:
            return Reply(on_request(body))
        except Exception as exc:
            return Reply(error=portable(exc))

    # ---- processes -----------------------------------------------------------------

    def _acquire(self, control: Watched) -> _Worker:
        dead: list[_Worker] = []
        try:
            return self._acquire_live(control, dead)
        finally:
            for worker in dead:
                self._discard(worker)

    def _acquire_live(self, control: Watched, dead: list[_Worker]) -> _Worker:
        """An idle worker still alive (one that died while idle, say by the OOM killer,
        goes to ``dead`` and a new one starts in its place), or a new one."""
        with self._cond:
            while True:
                if self._closed:
                    raise Unavailable("the server is shutting down: no compaction worker")
                while self._idle:
                    worker = self._idle.pop()
                    if _alive(worker.proc):
                        return worker
                    self._all.discard(worker)
                    dead.append(worker)
                if len(self._all) + self._starting < self.size:
                    launcher = self._reserve_start()
                    break
                if control.cancelled:
                    raise RunCancelled("the compaction was cancelled before it started")
                self._cond.wait(POLL_S)
        try:
            worker = launcher.spawn()
        except BaseException:
            self._start_ended(None)
            raise
        self._start_ended(worker)
        return worker

    def _reserve_start(self) -> _Launcher:
        """Count one start under way (the lock held); the launcher that makes it."""
        self._starting += 1
        if self._launcher is None:
            self._launcher = _Launcher(self.cores.worker_arg() if self.cores else "")
        return self._launcher

    def _start_ended(self, worker: _Worker | None) -> None:
        with self._cond:
            self._starting -= 1
            if worker is not None:
                self._all.add(worker)
            self._cond.notify_all()
        if worker is not None:
            log.info("compaction worker %d started", worker.pid)

    def _keep(self, worker: _Worker, keep: bool) -> bool:
        """Back to the idle ones when ``keep`` and it can serve again; else ended. Whether
        it was kept."""
        with self._cond:
            if keep and not self._closed and _alive(worker.proc):
                self._idle.append(worker)
                self._cond.notify_all()
                return True
            self._all.discard(worker)
            self._cond.notify_all()
        self._discard(worker)
        return False

    @staticmethod
    def _discard(worker: _Worker) -> None:
        if worker.proc.poll() is None:
            worker.proc.kill()
        worker.proc.wait()
        worker.conn.close()

    def close(self) -> None:
        """Idle workers exit on their closed pipe; busy ones are killed (their runs fail
        and clean up after themselves); then the launcher thread ends."""
        with self._cond:
            self._closed = True
            idle, busy = list(self._idle), [w for w in self._all if w not in self._idle]
            self._idle.clear()
            launcher, self._launcher = self._launcher, None
        for worker in busy:
            worker.proc.kill()
        for worker in idle:
            worker.conn.close()
        deadline = time.monotonic() + CLOSE_GRACE_S
        for worker in idle:
            try:
                worker.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait()
        with self._cond:
            self._all.difference_update(idle)
        if launcher is not None:
            launcher.stop()
