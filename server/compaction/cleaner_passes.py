"""LogCleaner passes as compaction runs, for the SEGMENTED side of the compaction API.

SEGMENTED topics compact by one LogCleaner pass (``clean_now``, in a worker too), not
by the TwoPhaseCompactor. The service sees the cleaner only through the two protocols
here, and a pass's result becomes the same ``CompactionRun`` figures (engine
``log-cleaner``) and ``CompactionStatus`` transitions that a LEDGER run reports, so
Compact, CompactionStatus and the metrics treat both kinds alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from compactlog.compactor.progress import RunControl
from compactlog.compactor.two_phase import CompactionRun
from compactlog.server.compaction.status import CompactionState, CompactionStatus

CLEANER_ENGINE = "log-cleaner"


class CleanerPass(Protocol):
    """What a LogCleaner pass reports (``compactor.log_cleaner.CleanerPassResult``)."""

    read: int
    kept: int
    removed: int
    tombstones: int
    keyless_dropped: int
    bytes_in: int
    bytes_out: int
    duration_ms: int
    error: str | None


class SegmentCleaner(Protocol):
    def check_compacts(self, name: str) -> None: ...

    def busy(self, name: str) -> bool: ...

    def clean_now(self, name: str, control: RunControl | None = None) -> CleanerPass: ...

    def preview(self, name: str, control: RunControl | None = None) -> CleanerPass: ...

    def last_result(self, name: str) -> CleanerPass | None: ...

    def abort(self, name: str) -> bool: ...

    def on_pass(self, listener: Callable[[str, Any], None]) -> None: ...


def cleaner_run(result: CleanerPass) -> CompactionRun:
    """A pass's figures as a compaction run's."""
    return CompactionRun(
        read=result.read,
        kept=result.kept,
        removed=result.removed,
        tombstones=result.tombstones,
        keyless_dropped=result.keyless_dropped,
        bytes_in=result.bytes_in,
        bytes_out=result.bytes_out,
        duration_ms=result.duration_ms,
        engine=CLEANER_ENGINE,
    )


def cleaner_status(status: CompactionStatus, result: CleanerPass) -> CompactionStatus:
    """The RUNNING ``status`` moved on by a finished pass: ERROR if it failed, else SUCCESS."""
    run = cleaner_run(result)
    if result.error:
        return status.to(CompactionState.ERROR, error=result.error, run=run)
    return status.to(CompactionState.SUCCESS, run=run)
