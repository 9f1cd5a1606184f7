"""Phase one on several threads (``find_winners(threads=...)``) finds what one thread finds.

The batches are read in order and digested on the threads (``digest_positions``), and one
thread maps the digests in order (``exchange_digested``): the figures, the winners and the
covered prefix of a partial run must be those of a run on one thread, across ledgers,
map growth (rehashing) and a map that fills.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog.compactor.log_cleaner.batch_scan import COMPILED
from compactlog.compactor.progress import LocalRunControl, Progress, RunCancelled
from compactlog.compactor.two_phase import TwoPhaseCompactor, phase_one
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.phase_one import MapWinners, find_winners
from compactlog.compactor.two_phase.worker_runs import WorkerCompactions
from compactlog.compactor.workers import WorkerPool
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record
from compactlog.storage.views import view_messages

pytestmark = pytest.mark.skipif(not COMPILED, reason="threads need the compiled scans")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LedgerStore]:
    made = LedgerStore(tmp_path / "db", ServerSettings(topic_defaults={}))
    made.create_topic("t", {"ledger.max.entries": "700"})
    rng = random.Random(7)
    for _ in range(400):
        records = []
        for _ in range(rng.randint(1, 15)):
            key = None if rng.random() < 0.05 else b"key-%d" % rng.randrange(900)
            records.append(Record(key, rng.choice([None, b"", b"v" * rng.randint(1, 40)])))
        made.append("t", records)
    yield made
    made.close()


def figures(w: MapWinners) -> tuple[object, ...]:
    return (
        w.read,
        w.kept,
        w.tombstones,
        w.keyless_dropped,
        w.bytes_in,
        w.distinct_keys,
        w.covered,
        bytes(w.bits or b""),
    )


@pytest.mark.parametrize("budget", [1 << 24, 24 * 700])  # roomy (grows), then one that fills
def test_four_threads_find_what_one_finds(store: LedgerStore, budget: int) -> None:
    storage = LedgerStoreCompactionStorage(store)
    inp = storage.begin("t")
    assert len(inp.segments) > 3
    one = find_winners(storage, inp, budget, threads=1)
    four = find_winners(storage, inp, budget, threads=4)
    assert figures(one) == figures(four)
    if budget < 1 << 24:
        assert one.covered is not None and one.covered < inp.entries  # a partial run
    else:
        assert one.covered is None and one.read == inp.entries > 2000


def test_a_cancel_stops_the_digesting_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LedgerStore(tmp_path / "big", ServerSettings(topic_defaults={}))
    store.create_topic("t", {})
    for start in range(0, 40_000, 1000):
        store.append("t", [Record(b"k%d" % (i % 5000), b"v") for i in range(start, start + 1000)])
    storage = LedgerStoreCompactionStorage(store)
    inp = storage.begin("t")
    control = LocalRunControl()
    seen: list[Progress] = []
    real = control.report

    def report(progress: Progress) -> None:
        real(progress)
        seen.append(progress)
        if len(seen) == 2:
            control.cancel()

    monkeypatch.setattr(control, "report", report)
    before = threading.active_count()
    with pytest.raises(RunCancelled):
        find_winners(storage, inp, 1 << 24, control, threads=4)
    assert threading.active_count() == before  # the pool ended with the run
    assert 2 * phase_one.REPORT_EVERY <= seen[-1].done < inp.entries
    store.close()


def test_a_worker_run_on_four_threads_leaves_the_view_one_thread_leaves(tmp_path: Path) -> None:
    stores = {}
    for name in ("local", "worker"):
        stores[name] = LedgerStore(tmp_path / name, ServerSettings(topic_defaults={}))
        stores[name].create_topic("t", {"ledger.max.entries": "5000"})
        for start in range(0, 20_000, 500):
            records = [Record(b"k%d" % (i % 3000) if i % 13 else None, b"v%d" % i)
                       for i in range(start, start + 500)]  # fmt: skip
            stores[name].append("t", records)
    TwoPhaseCompactor(LedgerStoreCompactionStorage(stores["local"]), 1 << 24).compact("t")
    pool = WorkerPool(1)
    try:
        WorkerCompactions.clear_work_dir(tmp_path / "work")
        runs = WorkerCompactions(
            stores["worker"], pool, tmp_path / "work", 1 << 24, float("inf"), lambda _p: None, 4
        )
        result = runs.compact("t", LocalRunControl())
    finally:
        pool.close()
    assert result.committed and result.run.kept == 3000

    def view(store: LedgerStore) -> list[tuple[object, ...]]:
        lac = store.topic("t").lac
        assert lac is not None
        found = view_messages(store, "t", MessageId(0, 0), lac, True)
        return [(m.id, m.key, m.value) for m in found]

    assert view(stores["worker"]) == view(stores["local"])
    for store in stores.values():
        store.close()
