"""A compaction commit belongs to one topic, not to a name: incarnations (RocksDB store).

A topic deleted and created again is another topic. Whatever point of a run the deletion
falls on, the run's commit into the new topic fails, with the incarnation the run began
with (the server's own runs) and without it (outside runs, which only name the topic):
then the ledger and horizon, older than the new topic, give the run away.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.errors import TopicNotFound
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import Record


def _open(path: Path) -> LedgerStore:
    return LedgerStore(path, ServerSettings(topic_defaults={}))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LedgerStore]:
    s = _open(tmp_path / "ledgers")
    yield s
    s.close()


def test_incarnations_differ_and_survive_a_restart(tmp_path: Path) -> None:
    store = _open(tmp_path / "ledgers")
    first = store.create_topic("t", {}).incarnation
    store.append("t", [Record(b"k", b"v")])
    store.delete_topic("t")
    second = store.create_topic("t", {}).incarnation
    assert second > first > 0  # the first one owned a ledger
    store.delete_topic("t")
    assert store.create_topic("t", {}).incarnation == second  # the second one owned none
    store.append("t", [Record(b"k", b"v")])
    store.close()
    store = _open(tmp_path / "ledgers")
    try:
        assert store.topic("t").incarnation == second
        store.append("t", [Record(b"k", b"v")])  # a new ledger after the restart's rollover
        assert all(led.ledger_id >= second for led in store.topic("t").ledgers)
    finally:
        store.close()


@pytest.mark.parametrize("with_incarnation", [True, False], ids=["local run", "outside run"])
@pytest.mark.parametrize("ledger_made", ["before", "after"], ids=["ledger old", "ledger new"])
def test_a_run_of_a_deleted_topic_cannot_commit_into_its_successor(
    store: LedgerStore, with_incarnation: bool, ledger_made: str
) -> None:
    storage = LedgerStoreCompactionStorage(store)
    store.create_topic("t", {})
    store.append("t", [Record(b"a", b"old"), Record(b"b", b"old")])
    inp = storage.begin("t")
    assert inp.horizon is not None
    ledger = storage.create_ledger("t") if ledger_made == "before" else 0
    store.delete_topic("t")
    store.create_topic("t", {})
    store.append("t", [Record(b"x", b"new")] * 3)
    if ledger_made == "after":  # begin, then the re-creation, then the run's ledger
        ledger = storage.create_ledger("t")
    storage.seal(ledger)
    with pytest.raises(TopicNotFound, match="deleted during compaction"):
        storage.commit(
            "t",
            ledger,
            inp.horizon,
            inp.previous_ledger,
            inp.incarnation if with_incarnation else 0,
        )
    assert store.topic("t").compacted_ledger_id() is None
