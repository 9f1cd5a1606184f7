"""PreviewCompaction and VerifyCompaction of LEDGER topics read in a real worker process:
the figures and digests an in-process read gives, nothing written, a cancel obeyed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog.compactor.progress import LocalRunControl, RunCancelled
from compactlog.compactor.two_phase import TwoPhaseCompactor
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.ledger_snapshot import compacted_view, plan
from compactlog.compactor.two_phase.verify import verify_view
from compactlog.compactor.two_phase.worker_runs import WorkerCompactions
from compactlog.compactor.workers import WorkerPool
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_store import LedgerStore

from .test_worker_runs import UNLIMITED, open_store, publish

FIGURES = ("read", "kept", "removed", "tombstones", "keyless_dropped", "bytes_in", "bytes_out")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LedgerStore]:
    made = open_store(tmp_path / "store")
    made.create_topic("t", {"ledger.max.entries": "60"})
    yield made
    made.close()


def runs_of(store: LedgerStore, pool: WorkerPool, work: Path) -> WorkerCompactions:
    WorkerCompactions.clear_work_dir(work)
    return WorkerCompactions(store, pool, work, 1 << 24, UNLIMITED, lambda _point: None)


def test_a_preview_in_a_worker_has_the_in_process_figures_and_writes_nothing(
    tmp_path: Path, pool: WorkerPool, store: LedgerStore
) -> None:
    runs = runs_of(store, pool, tmp_path / "work")
    local = TwoPhaseCompactor(LedgerStoreCompactionStorage(store), 1 << 24)
    for start, stop in ((0, 300), (300, 420)):  # a first run's input, then previous + tail
        publish(store, "t", stop, start)
        ledgers = {led.ledger_id for led in store.topic("t").ledgers}
        cursor = store.topic("t").cursors.get(COMPACTION_SUBSCRIPTION)
        preview = runs.preview("t", LocalRunControl())
        expected = local.preview(plan(store, "t"))
        assert {led.ledger_id for led in store.topic("t").ledgers} == ledgers
        assert store.topic("t").cursors.get(COMPACTION_SUBSCRIPTION) == cursor
        # nothing written: only the worker's secondary, kept open for its next job
        assert [p.name for p in (tmp_path / "work").iterdir()] == [f"secondary-{pool.pids()[0]}"]
        run = runs.compact("t", LocalRunControl()).run
        for name in FIGURES:
            assert getattr(preview, name) == getattr(expected, name) == getattr(run, name), name
        assert preview.read == stop - start + (7 if start else 0)
    assert runs.preview("t", LocalRunControl()).read == 0  # nothing new: no worker needed


def test_a_verification_in_a_worker_equals_the_in_process_one(
    tmp_path: Path, pool: WorkerPool, store: LedgerStore
) -> None:
    runs = runs_of(store, pool, tmp_path / "work")
    publish(store, "t", 200)
    view, empty = runs.verify("t", LocalRunControl())  # before the first run: no read
    assert view.ledger_id is None and empty.ok and empty.checked == 0
    runs.compact("t", LocalRunControl())
    publish(store, "t", 260, 200)  # a raw tail past the horizon is not checked
    view, result = runs.verify("t", LocalRunControl())
    expected = verify_view(LedgerStoreCompactionStorage(store), compacted_view(store, "t"))
    assert result.ok and result.checked == 7 and not result.problems
    assert (result.digest, result.checked) == (expected.digest, expected.checked)
    assert view.ledger_id == store.topic("t").compacted_ledger_id()


def test_a_cancelled_preview_stops_and_leaves_the_worker_usable(
    tmp_path: Path, pool: WorkerPool, store: LedgerStore
) -> None:
    """A preview throttled to take seconds, its caller gone before the worker read
    anything: it stops at once, and the same worker then previews unthrottled."""
    publish(store, "t", 3000)
    WorkerCompactions.clear_work_dir(tmp_path / "work")
    slow = WorkerCompactions(store, pool, tmp_path / "work", 1 << 24, 10_000.0, lambda _p: None)
    control = LocalRunControl()
    control.cancel()
    started = time.monotonic()
    with pytest.raises(RunCancelled):
        slow.preview("t", control)
    assert time.monotonic() - started < 5.0  # the throttle alone would take over 5 s
    assert runs_of(store, pool, tmp_path / "work").preview("t", LocalRunControl()).read == 3000
