"""TwoPhaseCompactor runs in a real worker process against a real ledger store: the same
view as in-process, progress through the phases, the throttle, cancellation, clean-up."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from compactlog.compactor.progress import (
    COMMIT,
    PHASE_ONE,
    PHASE_TWO,
    LocalRunControl,
    Progress,
    RunCancelled,
)
from compactlog.compactor.two_phase import TwoPhaseCompactor
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.worker_runs import WorkerCompactions
from compactlog.compactor.workers import WorkerPool
from compactlog.storage.compacted_digests import checked
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record
from compactlog.storage.views import view_messages

UNLIMITED = 1.7976931348623157e308


class Recorder(LocalRunControl):
    """A control that keeps every report, to check the phases a run went through."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Progress] = []

    def report(self, progress: Progress) -> None:
        self.seen.append(progress)
        super().report(progress)


def open_store(path: Path) -> LedgerStore:
    return LedgerStore(path, ServerSettings(topic_defaults={}))


def runs(
    store: LedgerStore, pool: WorkerPool, work: Path, rate: float = UNLIMITED
) -> WorkerCompactions:
    WorkerCompactions.clear_work_dir(work)
    return WorkerCompactions(store, pool, work, 1 << 24, rate, lambda _point: None)


def view(store: LedgerStore, topic: str) -> list[tuple[MessageId, bytes | None, bytes | None]]:
    lac = store.topic(topic).lac
    assert lac is not None
    return [(m.id, m.key, m.value) for m in view_messages(store, topic, MessageId(0, 0), lac, True)]


def publish(store: LedgerStore, topic: str, n: int, start: int = 0) -> None:
    records = [Record(b"k%d" % (i % 7) if i % 11 else None, b"v%d" % i) for i in range(start, n)]
    for i in range(0, len(records), 50):
        store.append(topic, records[i : i + 50])


def digests(store: LedgerStore) -> list[tuple[int, bytes]]:
    """Each compacted batch's key digests, checked against the batch (the stores'
    batches differ in their publish times, so in their CRCs)."""
    lid = store.topic("t").compacted_ledger_id()
    assert lid is not None
    batches = {at: (data, header.count) for at, data, header in store.batches(lid)}
    return [
        (at, bytes(checked(record, *batches[at], "test")))
        for at, record in store.digest_records(lid)
    ]


def test_a_worker_run_leaves_the_view_an_in_process_run_leaves(
    tmp_path: Path, pool: WorkerPool
) -> None:
    stores = {name: open_store(tmp_path / name) for name in ("local", "worker")}
    for store in stores.values():
        store.create_topic("t", {"ledger.max.entries": "60"})
        publish(store, "t", 300)
    local = TwoPhaseCompactor(LedgerStoreCompactionStorage(stores["local"]), 1 << 24)
    worker = runs(stores["worker"], pool, tmp_path / "work")
    control = Recorder()
    for _round in range(2):  # a first run, then an incremental one over the previous
        local.compact("t")
        result = worker.compact("t", control)
        assert result.committed and result.run.kept == 7
        assert view(stores["worker"], "t") == view(stores["local"], "t")
        # the key digests beside the batches, from the worker's second SST file
        assert digests(stores["worker"]) == digests(stores["local"]) != []
        for store in stores.values():
            publish(store, "t", 400, 300)
    phases = [p.phase for p in control.seen]
    assert phases.index(PHASE_ONE) < phases.index(PHASE_TWO) < phases.index(COMMIT)
    one = [p for p in control.seen if p.phase == PHASE_ONE][-1]
    assert one.bytes_read > 0 and 0 < one.done <= one.total
    # the SST files ingested; the worker's secondary kept open for its next run
    assert [p.name for p in (tmp_path / "work").iterdir()] == [f"secondary-{pool.pids()[0]}"]
    for store in stores.values():
        store.close()


def test_nothing_to_do_needs_no_worker(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db")
    store.create_topic("t", {})
    unused = WorkerPool(1)
    result = runs(store, unused, tmp_path / "work").compact("t", LocalRunControl())
    assert not result.committed and unused.pids() == []
    store.close()


def test_a_cancelled_throttled_run_leaves_nothing(tmp_path: Path, pool: WorkerPool) -> None:
    store = open_store(tmp_path / "db")
    store.create_topic("t", {})
    store.append("t", [Record(b"k%d" % i, b"x" * 1000) for i in range(2000)])
    before = {lid for lid in range(1, 20) if store.ledger(lid) is not None}
    control = LocalRunControl()
    threading.Timer(0.5, control.cancel).start()
    started = time.monotonic()
    with pytest.raises(RunCancelled):
        runs(store, pool, tmp_path / "work", rate=200_000).compact("t", control)  # 10+ s
    assert time.monotonic() - started < 5
    assert {lid for lid in range(1, 20) if store.ledger(lid) is not None} == before
    assert store.topic("t").compacted_ledger_id() is None
    assert list((tmp_path / "work").glob("*.sst")) == []
    store.close()


def test_a_worker_keeps_its_secondary_between_runs_and_drops_it_when_one_fails(
    tmp_path: Path, pool: WorkerPool
) -> None:
    store = open_store(tmp_path / "db")
    store.create_topic("t", {"ledger.max.entries": "60"})
    work = tmp_path / "work"
    worker = runs(store, pool, work)
    secondary = work / f"secondary-{pool.pids()[0]}"
    publish(store, "t", 300)
    assert worker.compact("t", LocalRunControl()).committed
    (secondary / "mark").touch()  # a new instance would start in an emptied directory
    publish(store, "t", 400, 300)  # the next run sees these through a catch-up alone
    result = worker.compact("t", LocalRunControl())
    assert result.committed and result.run.kept == 7
    assert (secondary / "mark").exists()  # the same instance, not a new one
    lac = store.topic("t").lac
    assert lac is not None
    latest = {m.key: m.value for m in view_messages(store, "t", MessageId(0, 0), lac, False)}
    assert {k: v for _id, k, v in view(store, "t")} == {
        k: v for k, v in latest.items() if k is not None
    }
    publish(store, "t", 2000, 400)
    control = LocalRunControl()
    control.cancel()  # the run fails at its first check: the worker drops its secondary
    with pytest.raises(RunCancelled):
        worker.compact("t", control)
    assert not secondary.exists()
    assert worker.compact("t", LocalRunControl()).committed  # and opens a fresh one
    assert secondary.exists() and not (secondary / "mark").exists()
    store.close()


def test_an_idle_worker_closes_its_secondary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTLOG_WORKER_IDLE_S", "0.3")
    idle = WorkerPool(1)  # its worker reads the variable at its start
    store = open_store(tmp_path / "db")
    store.create_topic("t", {})
    publish(store, "t", 100)
    try:
        assert runs(store, idle, tmp_path / "work").compact("t", LocalRunControl()).committed
        secondary = tmp_path / "work" / f"secondary-{idle.pids()[0]}"
        deadline = time.monotonic() + 10
        while secondary.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not secondary.exists()
    finally:
        idle.close()
        store.close()
