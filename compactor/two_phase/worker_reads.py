"""PreviewCompaction and VerifyCompaction of LEDGER topics in a compaction worker.

Both read a whole topic: a preview runs phase one and phase two's reads over the input a
run started now would have, a verification recomputes latest-per-key from the raw history
(a dictionary of full keys, so memory in proportion to the key space). In the serving
process they would take its CPU and memory from the traffic as a run once did, so they go
to a worker as runs do. The server takes the read-only snapshot (``ledger_snapshot``:
nothing written, the ``__compaction`` cursor not even created) and ships it; the worker
reads through a secondary instance of the store (``worker_job.metered_secondary``),
throttled like a run, and sends back figures. Neither asks the server for anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from compactlog.compactor.two_phase.compactor import CompactionRun, TwoPhaseCompactor
from compactlog.compactor.two_phase.ledger_adapter import LedgerReads
from compactlog.compactor.two_phase.ledger_snapshot import CompactedView
from compactlog.compactor.two_phase.phase_one import find_winners
from compactlog.compactor.two_phase.storage import CompactionInput, Segment
from compactlog.compactor.two_phase.verify import Verification, verify_view
from compactlog.compactor.two_phase.worker_job import metered_secondary
from compactlog.compactor.worker_link import WorkerLink
from compactlog.errors import DataLoss
from compactlog.storage.types import MessageId


def last_ids(segments: tuple[Segment | None, ...]) -> list[MessageId]:
    """The last id (a position, in a compacted ledger) of each segment there is: once the
    secondary shows them, it shows everything the snapshot read (written before them)."""
    return [MessageId(s.ledger_id, s.last_entry) for s in segments if s is not None]


@dataclass(frozen=True)
class LedgerPreviewJob:
    """A preview's reads: ``TwoPhaseCompactor.preview`` over ``input``."""

    input: CompactionInput
    store_path: str
    work_dir: str
    phase_one_memory_bytes: int
    io_max_bytes_per_second: float
    threads: int = 1

    def run(self, link: WorkerLink) -> CompactionRun:
        where = (self.store_path, self.work_dir, self.io_max_bytes_per_second)
        visible = last_ids(self.input.segments[-1:])
        with metered_secondary(*where, visible, link) as (scans, limited):
            compactor = TwoPhaseCompactor(  # a preview only reads: no write method is called
                LedgerReads(scans, in_server=False),  # type: ignore[arg-type]
                self.phase_one_memory_bytes,
                phase_one=partial(find_winners, threads=1 if limited else self.threads),
            )
            return compactor.preview(self.input, link)


@dataclass(frozen=True)
class LedgerVerifyJob:
    """A verification: ``verify.verify_view`` of ``view``."""

    view: CompactedView
    store_path: str
    work_dir: str
    io_max_bytes_per_second: float

    def run(self, link: WorkerLink) -> Verification:
        where = (self.store_path, self.work_dir, self.io_max_bytes_per_second)
        visible = last_ids((self.view.ledger, *self.view.raw[-1:]))
        try:
            with metered_secondary(*where, visible, link) as (scans, _limited):
                storage = LedgerReads(scans, in_server=False)
                return verify_view(storage, self.view)
        except DataLoss as exc:  # a ledger of the snapshot went (retention) before it showed
            out = Verification()
            out.problem(f"cannot read the topic: {exc}")
            return out
