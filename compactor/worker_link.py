"""The conversation between the server and a compaction worker, and the worker's end of it.

One duplex pipe per worker (``multiprocessing.connection``: pickled messages)::

    server -> worker   a job (any object with ``run(link)``), then Replies, or CANCEL
    worker -> server   Report(progress)*  Request(body) (waits for the Reply)  Done | Failed

A job runs in the worker and talks back through its ``WorkerLink``: ``report`` (progress,
sent at most ten times a second), ``check`` (raises ``RunCancelled`` once the server sent
CANCEL), ``request`` (asks the server to do something only it may do, the ingest and
commit of a ledger or the swap of a cleaned segment, and returns its answer or raises its
error). ``cache`` keeps what a worker reuses between jobs (an offset map). A job may
talk from two threads (a cleaner pass asks for a swap while it writes on and reports):
the link sends under a lock, requests go one at a time, and while one waits for its
Reply its thread alone reads the pipe (a CANCEL it meets is kept for ``check``), so the
Reply wakes it the moment it arrives.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from compactlog.compactor.progress import Progress, RunCancelled
from compactlog.errors import CompactlogError, from_os_error

CANCEL = "cancel"
REPORT_EVERY_S = 0.1


class WorkerJobFailed(CompactlogError):
    """A worker's job raised an error that could not travel back as itself."""


@dataclass(frozen=True)
class Report:
    progress: Progress


@dataclass(frozen=True)
class Request:
    body: object


@dataclass(frozen=True)
class Reply:
    value: object = None
    error: BaseException | None = None


@dataclass(frozen=True)
class Done:
    value: object


@dataclass(frozen=True)
class Failed:
    error: BaseException
    trace: str


def portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives a pickle round trip, else a WorkerJobFailed naming it. An
    ``OSError`` goes as the error CONTRACT section 11 names for its cause (DISK_FULL,
    STORAGE_UNAVAILABLE, FILE_LIMIT, with ``path`` and ``errno``)."""
    if isinstance(exc, OSError):
        exc = from_os_error(exc, "a compaction worker's file operation")
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return WorkerJobFailed(f"{type(exc).__name__}: {exc}")


def kill_self() -> None:
    """A fault point's crash in a worker is a real kill -9: no handler, no flush."""
    os.kill(os.getpid(), signal.SIGKILL)


class WorkerJob(Protocol):
    """A run shipped to a worker: pickled there, ``run`` in the worker process."""

    def run(self, link: WorkerLink) -> object: ...


class WorkerLink:
    """The worker's end of the pipe for one job; a ``RunControl`` for the job's run."""

    def __init__(self, conn: Connection, cache: dict[Any, Any]) -> None:
        self.conn = conn
        self.cache = cache
        self.cancelled = False
        self._last_sent = 0.0
        self._last_phase = ""
        self._pending: Progress | None = None
        self._lock = threading.Lock()  # the pipe's both ways, and the fields above
        # One request at a time; held while its Reply is awaited, when the asking thread
        # alone reads the pipe.
        self._asking = threading.Lock()
        self._replies: deque[Reply] = deque()

    def report(self, progress: Progress) -> None:
        """Sent at once when the phase changes, else at most every ``REPORT_EVERY_S``."""
        with self._lock:
            now = time.monotonic()
            if now - self._last_sent < REPORT_EVERY_S and progress.phase == self._last_phase:
                self._pending = progress
                return
            if progress.phase != self._last_phase:
                self._flush()  # the last figures of the phase that ended go first
            self._last_sent, self._last_phase, self._pending = now, progress.phase, None
            self.conn.send(Report(progress))

    def flush(self) -> None:
        """Send the last progress held back by the rate limit."""
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if self._pending is not None:
            self.conn.send(Report(self._pending))
            self._pending = None

    def _read_waiting(self) -> None:
        """Take every message waiting in the pipe (the lock held)."""
        while self.conn.poll():
            msg = self.conn.recv()
            if msg == CANCEL:
                self.cancelled = True
            else:
                assert isinstance(msg, Reply), msg
                self._replies.append(msg)

    def poll_cancel(self) -> bool:
        """True once the server asked this job to stop (reads what is waiting)."""
        with self._lock:
            if not self.cancelled and not self._asking.locked():
                self._read_waiting()
            return self.cancelled

    def check(self) -> None:
        if self.poll_cancel():
            raise RunCancelled("the compaction was cancelled")

    def request(self, body: object) -> object:
        """Ask the server; its error is raised here as itself."""
        with self._asking:  # taken before the send: no other thread reads the Reply
            with self._lock:
                self._flush()
                self.conn.send(Request(body))
            reply = self._await_reply()
        if reply.error is not None:
            raise reply.error
        return reply.value

    def _await_reply(self) -> Reply:
        while True:
            with self._lock:
                self._read_waiting()
                if self._replies:
                    return self._replies.popleft()
            wait([self.conn])  # the Reply, a CANCEL, or the server gone (EOF on recv)
