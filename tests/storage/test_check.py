"""``compactlog check DATA_DIR``: the offline verifier reads everything and names what is
wrong where; it refuses a data dir a server holds."""

from __future__ import annotations

import fcntl
import gc
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.errors import StoreLocked
from compactlog.storage import keys
from compactlog.storage.check import check_data_dir
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.rocks import Batch
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.types import Record

SETTINGS = ServerSettings(topic_defaults={})


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    ledgers = LedgerStore(data / "ledgers", SETTINGS)
    ledgers.create_topic("led", {"ledger.max.entries": "10"})
    for i in range(30):
        ledgers.append("led", [Record(b"k%d" % (i % 4), b"v%d" % i)])
    ledgers.open_cursor("led", "sub")
    ledgers.db.flush()
    ledgers.close()
    segments = SegmentedLogManager(data / "segments", SETTINGS, start_threads=False)
    segments.create_topic("seg", {"segment.bytes": "300", "index.interval.bytes": "1"})
    for i in range(30):
        segments.append("seg", [Record(b"k%d" % (i % 4), b"v%d" % i)])
    segments.cursors("seg").open("sub", None)
    segments.get_log("seg").roll()
    segments.close()
    gc.collect()
    return data


def flip(path: Path, position: int, mask: int = 0xFF) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


def test_a_whole_data_dir_checks_clean(data_dir: Path) -> None:
    report = check_data_dir(data_dir)
    assert report.ok, report.problems
    assert report.counts["ledgers"] == 3 and report.counts["ledger batches"] == 30
    assert report.counts["segment batches"] == 30 and report.counts["segments"] >= 10


def test_every_kind_of_damage_is_named_where_it_is(data_dir: Path) -> None:
    seg_dir = data_dir / "segments" / "seg"
    segment = sorted(seg_dir.glob("*.log"))[1]
    flip(segment, 40)
    index = next(p for p in sorted(seg_dir.glob("*.index")) if p.stat().st_size)
    flip(index, index.stat().st_size - 1, 0x01)
    flip(seg_dir / "cursors.json", 3, 0x01)
    flip(seg_dir / "topic.json", 5, 0x01)
    sst = next((data_dir / "ledgers").glob("*.sst"))
    flip(sst, 100)
    report = check_data_dir(data_dir)
    text = "\n".join(report.problems)
    for name in (segment.name, index.name, "cursors.json", "topic.json", "ledgers"):
        assert name in text, (name, text)


def test_the_check_refuses_a_dir_a_server_holds(data_dir: Path) -> None:
    with open(data_dir / "LOCK.server", "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(StoreLocked, match="stop it before checking"):
            check_data_dir(data_dir)


def test_the_cli_exits_non_zero_on_problems(data_dir: Path) -> None:
    def run() -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "compactlog", "check", str(data_dir)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    clean = run()
    assert clean.returncode == 0 and "no problems" in clean.stdout
    flip(sorted((data_dir / "segments" / "seg").glob("*.log"))[0], 20)
    damaged = run()
    assert damaged.returncode == 1
    assert "PROBLEM" in damaged.stdout and "00000000000000000000.log" in damaged.stdout


def _tamper_key_index(data_dir: Path, change: Callable[[LedgerStore], None]) -> None:
    store = LedgerStore(data_dir / "ledgers", SETTINGS)
    store.key_indexer.close()  # no merge races the change
    change(store)
    store.db.flush()
    store.close()


def test_the_key_index_is_checked_against_the_batches(data_dir: Path) -> None:
    report = check_data_dir(data_dir)
    assert report.ok and report.counts["key index records"] >= 3

    def drop_one_block(store: LedgerStore) -> None:
        key = next(
            store.db.scan_keys(*keys.key_index_range(store.topic("led").ledgers[-1].ledger_id))
        )
        store.db.write(_deleting(key))

    _tamper_key_index(data_dir, drop_one_block)
    text = "\n".join(check_data_dir(data_dir).problems)
    assert "key index" in text and "missing from it" in text


def test_key_digests_without_a_ledger_are_a_problem(data_dir: Path) -> None:
    _tamper_key_index(data_dir, lambda s: s.db.put(keys.digest_key(998, 0), bytes(16)))
    assert (
        "ledger 998: key digests stored without a ledger meta" in check_data_dir(data_dir).problems
    )


def test_a_key_index_without_a_ledger_is_a_problem(data_dir: Path) -> None:
    _tamper_key_index(data_dir, lambda s: s.db.put(keys.index_block_key(999, 0), bytes(16)))
    assert (
        "ledger 999: key index records stored without a ledger meta"
        in check_data_dir(data_dir).problems
    )


def _deleting(key: bytes) -> Batch:
    batch = Batch()
    batch.delete(key)
    return batch
