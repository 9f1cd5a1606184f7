"""How a compaction run reports progress and learns that it was cancelled.

Both designs (the TwoPhaseCompactor and a LogCleaner pass), run in the server or in a
worker process, report through a ``RunControl``: the server turns the reports into
``WatchCompaction`` updates and the figures of ``GetCompactionStatus``; a cancel sets the
flag that the run checks between batches, and the run then stops with ``RunCancelled``,
having made nothing visible (the caller removes what it wrote).

Phases, as ``CompactionProgress.phase`` names them: ``phase-one``, ``phase-two`` and
``commit`` (LEDGER), ``cleaning`` (SEGMENTED).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Protocol

PHASE_ONE = "phase-one"
PHASE_TWO = "phase-two"
COMMIT = "commit"
CLEANING = "cleaning"


class RunCancelled(Exception):
    """The run saw its cancel flag and stopped; nothing of it is visible."""


@dataclass(frozen=True)
class Progress:
    phase: str = ""
    done: int = 0  # messages (or records) processed in this phase
    total: int = 0  # messages the phase will process (0: not known yet)
    bytes_read: int = 0
    bytes_written: int = 0
    started: float = 0.0  # time.monotonic() when the run began

    @property
    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000) if self.started else 0


class RunControl(Protocol):
    def report(self, progress: Progress) -> None:
        """The run's latest figures (called often: must be cheap)."""
        ...

    def check(self) -> None:
        """Raise ``RunCancelled`` when the run was asked to stop."""
        ...


class LocalRunControl:
    """A ``RunControl`` shared between a run's thread and the server's handlers."""

    def __init__(self) -> None:
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._progress = Progress(started=time.monotonic())
        self.changed = threading.Condition(self._lock)

    def report(self, progress: Progress) -> None:
        with self._lock:
            self._progress = replace(progress, started=self._progress.started)
            self.changed.notify_all()

    def check(self) -> None:
        if self._cancel.is_set():
            raise RunCancelled("the compaction was cancelled")

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def snapshot(self) -> Progress:
        with self._lock:
            return self._progress


class NoControl:
    """For runs nobody watches or cancels (tests, tools)."""

    def report(self, progress: Progress) -> None:
        pass

    def check(self) -> None:
        pass
