"""The server's side of a TwoPhaseCompactor run in a compaction worker.

Per run: fix the input (``begin``: creates the ``__compaction`` cursor if missing) and
allocate the new ledger (its id persisted first, so ids are never reused, and its empty
meta written, so a crash anywhere leaves an unreferenced ledger that start-up collects);
ship ``LedgerCompactionJob``; answer the worker's requests in the order the compactor
makes them:

    CommitLedger   ingest the SST files (the batches and their key digests, one step),
                   seal the ledger with its counts,
                   [after_ingest], commit the cursor + CompactedTopicLedger in one synced
                   write (CommitConflict / TopicNotFound go back to the worker's compactor)
    DeleteLedger   the previous compacted ledger, only once the commit happened

When the run fails, whatever the cause (an error, a cancel, the worker killed at any
step), what it left goes at once: the new ledger and its SST file if nothing was
committed, else the previous compacted ledger if the worker did not live to ask. The view
readers see is therefore the old one or the new one, never a mix.

Previews and verifications go to the same pool (``worker_reads``): the server takes the
read-only snapshot and ships it, and the worker sends back figures without a request.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from compactlog.compactor.progress import PHASE_ONE, Progress, RunCancelled
from compactlog.compactor.two_phase.compactor import (
    ENGINE,
    CompactionResult,
    CompactionRun,
    FaultHook,
)
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.ledger_digests import digests_sst
from compactlog.compactor.two_phase.ledger_snapshot import CompactedView, compacted_view, plan
from compactlog.compactor.two_phase.storage import CompactionInput
from compactlog.compactor.two_phase.verify import Verification, verify_view
from compactlog.compactor.two_phase.worker_job import (
    CommitLedger,
    DeleteLedger,
    LedgerCompactionJob,
)
from compactlog.compactor.two_phase.worker_reads import LedgerPreviewJob, LedgerVerifyJob
from compactlog.compactor.workers import Watched, WorkerPool
from compactlog.errors import InvalidArgument
from compactlog.storage.ledger_store import LedgerStore

log = logging.getLogger(__name__)


@dataclass
class _Run:
    topic: str
    input: CompactionInput
    ledger_id: int
    sst: Path
    control: Watched
    committed: bool = False
    previous_deleted: bool = False


class WorkerCompactions:
    """TwoPhaseCompactor runs of LEDGER topics in the worker pool."""

    def __init__(
        self,
        store: LedgerStore,
        pool: WorkerPool,
        work_dir: Path,
        phase_one_memory_bytes: int,
        io_max_bytes_per_second: float,
        fault: FaultHook,
        threads: int = 1,
    ) -> None:
        self.store = store
        self.threads = threads
        self.local = LedgerStoreCompactionStorage(store)
        self.pool = pool
        self.work_dir = work_dir
        self.phase_one_memory_bytes = phase_one_memory_bytes
        self.io_max_bytes_per_second = io_max_bytes_per_second
        self.fault = fault

    @staticmethod
    def clear_work_dir(work_dir: Path) -> None:
        """At start-up: SST files no run will ingest, dead workers' secondary dirs."""
        shutil.rmtree(work_dir, ignore_errors=True)
        work_dir.mkdir(parents=True, exist_ok=True)

    def compact(self, topic: str, control: Watched) -> CompactionResult:
        """One run; its ``duration_ms`` is the server's wall time, from the input snapshot
        to the commit, so the worker's start and catch-up count too."""
        started = time.monotonic()
        inp = self.local.begin(topic)
        if inp.nothing_to_do:
            return CompactionResult(
                CompactionRun(), inp.previous_ledger, inp.previous_horizon, inp.previous_ledger
            )
        control.report(Progress(PHASE_ONE, 0, inp.entries))  # while a worker starts
        ledger_id = self.local.create_ledger(topic)
        run = _Run(topic, inp, ledger_id, self.work_dir / f"ledger-{ledger_id}.sst", control)
        job = LedgerCompactionJob(
            inp,
            ledger_id,
            str(self.store.db.path),
            str(run.sst),
            str(self.work_dir),
            self.phase_one_memory_bytes,
            self.io_max_bytes_per_second,
            self.threads,
        )
        try:
            result = self.pool.run(
                job, lambda body: self._answer(run, body), control, f"the compaction of {topic!r}"
            )
        except BaseException:
            self._clean_up(run)
            raise
        assert isinstance(result, CompactionResult)
        wall_ms = int((time.monotonic() - started) * 1000)
        return dataclasses.replace(result, run=dataclasses.replace(result.run, duration_ms=wall_ms))

    def _answer(self, run: _Run, body: object) -> None:
        if isinstance(body, CommitLedger) and body.ledger_id == run.ledger_id and not run.committed:
            self._commit(run, body)
        elif (
            isinstance(body, DeleteLedger)
            and body.ledger_id == run.input.previous_ledger
            and run.committed
            and not run.previous_deleted
        ):
            self.local.delete_ledger(body.ledger_id)
            run.previous_deleted = True
        else:
            raise InvalidArgument(f"a compaction worker of {run.topic!r} cannot ask for {body!r}")

    def _commit(self, run: _Run, body: CommitLedger) -> None:
        if run.control.cancelled:
            raise RunCancelled("the compaction was cancelled")
        if body.sst is not None and Path(body.sst) != run.sst:
            raise InvalidArgument(f"ledger {run.ledger_id} is not written to {body.sst}")
        inp = run.input
        assert inp.horizon is not None
        previous = inp.previous_horizon
        if body.horizon > inp.horizon or (previous is not None and body.horizon <= previous):
            raise InvalidArgument(
                f"horizon {body.horizon} is outside the run's input ({previous}, {inp.horizon}]"
            )
        digests = digests_sst(run.sst)
        if body.digests_sst is not None and Path(body.digests_sst) != digests:
            raise InvalidArgument(f"ledger {run.ledger_id}'s digests are not in {body.digests_sst}")
        sst = run.sst if body.sst is not None else None
        with_digests = digests if body.digests_sst is not None else None
        self.store.ingest_ledger(run.ledger_id, sst, body.entries, body.bytes, with_digests)
        log.info("compaction of %s: ledger %d ingested, committing", run.topic, run.ledger_id)
        self.fault("after_ingest")
        self.local.commit(
            run.topic, run.ledger_id, body.horizon, inp.previous_ledger, inp.incarnation
        )
        run.committed = True

    # ---- read-only jobs: PreviewCompaction, VerifyCompaction (worker_reads) -----------

    def preview(self, topic: str, control: Watched) -> CompactionRun:
        """The figures of a run started now, read in a worker; nothing is written."""
        inp = plan(self.store, topic)
        if inp.nothing_to_do:
            return CompactionRun(engine=ENGINE)
        job = LedgerPreviewJob(
            inp,
            str(self.store.db.path),
            str(self.work_dir),
            self.phase_one_memory_bytes,
            self.io_max_bytes_per_second,
            self.threads,
        )
        run = self._read_only(job, control, f"the preview of {topic!r}")
        assert isinstance(run, CompactionRun)
        return run

    def verify(self, topic: str, control: Watched) -> tuple[CompactedView, Verification]:
        """The compacted view and its check against the raw history, read in a worker
        (before the first run there is nothing to read: the empty view's digest)."""
        view = compacted_view(self.store, topic)
        if view.ledger_id is None:
            return view, verify_view(self.local, view)
        job = LedgerVerifyJob(
            view, str(self.store.db.path), str(self.work_dir), self.io_max_bytes_per_second
        )
        result = self._read_only(job, control, f"the verification of {topic!r}")
        assert isinstance(result, Verification)
        return view, result

    def _read_only(self, job: object, control: Watched, label: str) -> object:
        def refuse(body: object) -> None:
            raise InvalidArgument(f"{label} cannot ask the server for {body!r}")

        try:
            return self.pool.run(job, refuse, control, label)
        except BaseException:
            self._clear_dead_secondaries()
            raise

    # ---- failures ----------------------------------------------------------------------

    def _clear_dead_secondaries(self) -> None:
        self.clear_secondaries(self.work_dir, self.pool.pids())

    @staticmethod
    def clear_secondaries(work_dir: Path, live: Iterable[int] = ()) -> None:
        """The secondary dirs of workers not in ``live``: a dead worker's, or, once the
        pool is closed, the ones its workers kept open between jobs."""
        keep = {f"secondary-{pid}" for pid in live}
        for secondary in work_dir.glob("secondary-*"):
            if secondary.name not in keep:
                shutil.rmtree(secondary, ignore_errors=True)

    def _clean_up(self, run: _Run) -> None:
        """Best effort: what is left now goes at the next start-up."""
        self._clear_dead_secondaries()
        try:
            if not run.committed:
                run.sst.unlink(missing_ok=True)
                digests_sst(run.sst).unlink(missing_ok=True)
                self.local.delete_ledger(run.ledger_id)
            elif run.input.previous_ledger is not None and not run.previous_deleted:
                self.local.delete_ledger(run.input.previous_ledger)
        except Exception:
            log.warning(
                "could not remove what the failed compaction of %s left", run.topic, exc_info=True
            )
