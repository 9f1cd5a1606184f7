"""The LEDGER topic catalog beside the store: it never lists more than the store holds, so a
delete the disk refuses changes nothing, and a start after faults raises no false alarm;
a store that lost a topic the catalog lists is not opened (the MANIFEST case is cut for
real in tests/e2e/test_manifest_cut.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compactlog.errors import CorruptData, DiskFull
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_catalog import catalog_path
from compactlog.storage.ledger_store import LedgerStore

SETTINGS = ServerSettings(topic_defaults={})


def test_a_delete_the_disk_refuses_changes_nothing(small_disk) -> None:  # type: ignore[no-untyped-def]
    disk = small_disk(64 << 20)
    path = disk.path / "ledgers"
    store = LedgerStore(path, SETTINGS)
    store.create_topic("a", {})
    store.create_topic("b", {})
    disk.fill(leave=0)
    with pytest.raises(DiskFull) as refused:  # the catalog goes first, and cannot
        store.delete_topic("a")
    assert refused.value.metadata["path"].endswith(".catalog")
    assert sorted(store.topic_names()) == ["a", "b"]
    disk.free()
    store.delete_topic("a")
    store.close()
    store = LedgerStore(path, SETTINGS)  # no false alarm: the catalog is the store's
    assert store.topic_names() == ["b"]
    store.close()


def test_a_store_without_a_listed_topic_is_not_opened(tmp_path: Path) -> None:
    path = tmp_path / "ledgers"
    store = LedgerStore(path, SETTINGS)
    store.create_topic("a", {})
    store.close()
    before = catalog_path(path).read_bytes()
    shutil.rmtree(path)  # the store lost everything; the catalog still lists "a"
    path.mkdir()
    with pytest.raises(CorruptData, match="opened without topics its catalog lists \\(a\\)"):
        LedgerStore(path, SETTINGS)
    assert catalog_path(path).read_bytes() == before  # nothing rewritten or deleted
