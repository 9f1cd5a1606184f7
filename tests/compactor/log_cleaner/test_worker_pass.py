"""LogCleaner passes in a real worker process: the same result as in-process, the server
alone changes the log, and a cleaned copy that does not load whole is never swapped in."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from compactlog.compactor.log_cleaner import LogCleaner
from compactlog.compactor.log_cleaner.worker_pass import WorkerPasses
from compactlog.compactor.workers import WorkerPool
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import CleaningAborted, LogSegment, SegmentedLogManager
from compactlog.storage.segmented.segment import CLEANED, file_name
from compactlog.storage.segmented.swap import swap_in_cleaned
from compactlog.storage.types import Record

SETTINGS = ServerSettings(topic_defaults={}, log_cleaner_dedupe_buffer_size=24 * 1024)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "200", "retention.ms": "-1"}
KEYS = [b"A", b"B", b"A", None, b"C", b"B", b"A", b"D", b"C", b"A"]
NOW = 1_700_000_000.0


def filled(root: Path) -> SegmentedLogManager:
    m = SegmentedLogManager(root, SETTINGS, clock=lambda: NOW, start_threads=False)
    m.create_topic("t", COMPACT)
    for i, key in enumerate(KEYS):
        m.append("t", [Record(key, None if i == 5 else b"v%d" % i)])
    m.get_log("t").roll()
    return m


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix == ".log"}


def test_a_worker_pass_equals_an_in_process_pass(tmp_path: Path, pool: WorkerPool) -> None:
    local = filled(tmp_path / "local")
    remote = filled(tmp_path / "remote")
    result_local = LogCleaner(local, SETTINGS, clock=lambda: NOW).clean_now("t")
    cleaner = LogCleaner(remote, SETTINGS, clock=lambda: NOW, passes=WorkerPasses(pool, SETTINGS))
    result_remote = cleaner.clean_now("t")
    assert result_remote.error is None
    assert (result_remote.read, result_remote.kept, result_remote.bytes_out) == (
        result_local.read,
        result_local.kept,
        result_local.bytes_out,
    )
    survivors = [(x.id, x.key, x.value) for x in remote.read("t", 0, 0)]
    assert survivors == [(x.id, x.key, x.value) for x in local.read("t", 0, 0)]
    assert files(tmp_path / "remote" / "t") == files(tmp_path / "local" / "t")
    assert cleaner.cleaner_manager.checkpoint.get("t") == len(KEYS)
    local.close()
    remote.close()


def test_a_segment_gone_before_the_pass_aborts_it(tmp_path: Path, pool: WorkerPool) -> None:
    m = filled(tmp_path)
    cleaner = LogCleaner(m, SETTINGS, clock=lambda: NOW, passes=WorkerPasses(pool, SETTINGS))
    first = m.get_log("t").segments[0]
    os.rename(first.path(), first.path().with_suffix(".log.deleted"))  # as retention does
    result = cleaner.clean_now("t")
    assert result.error is not None and "segments changed" in result.error
    assert cleaner.stats().uncleanable_count == 0  # not the log's fault
    assert not list((tmp_path / "t").glob(f"*{CLEANED}"))
    m.close()


def test_a_torn_cleaned_copy_is_never_swapped_in(tmp_path: Path) -> None:
    m = filled(tmp_path)
    log = m.get_log("t")
    group = [s.base_offset for s in log.segments[:2]]
    for ext in (".log", ".index", ".timeindex"):
        shutil.copy(
            tmp_path / "t" / file_name(group[0], ext),
            tmp_path / "t" / file_name(group[0], ext, CLEANED),
        )
    cleaned = tmp_path / "t" / file_name(group[0], ".log", CLEANED)
    os.truncate(cleaned, cleaned.stat().st_size - 3)
    before = files(tmp_path / "t")
    with pytest.raises(CleaningAborted, match="unusable"):
        swap_in_cleaned(log, group[0], group)
    assert files(tmp_path / "t") == before and not cleaned.exists()
    m.close()


def test_a_read_only_segment_writes_nothing(tmp_path: Path) -> None:
    m = filled(tmp_path)
    seg = m.get_log("t").segments[0]
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t").iterdir()}
    view = LogSegment.open_read_only(tmp_path / "t", seg.base_offset, seg.params)
    assert [h.first_id for _b, _p, h, _a in view.batches(0, view.size)] == [
        h.first_id for _b, _p, h, _a in seg.batches(0, seg.size)
    ]
    fd = view.open_fd()
    with pytest.raises(OSError):
        os.write(fd, b"x")
    os.close(fd)
    del view
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t").iterdir()} == before
    m.close()


def test_the_worker_writes_the_next_segment_while_the_server_swaps(
    tmp_path: Path, pool: WorkerPool
) -> None:
    """Distinct keys: nothing is superseded, no group joins another, one ``.cleaned``
    segment a group. While the server holds the first swap, the worker has gone on to
    write the second group's segment (``finisher``); the swaps still come in log order,
    each segment synced before it, and the log ends as an in-process pass leaves it."""
    local, remote = (filled_distinct(tmp_path / name) for name in ("local", "remote"))
    LogCleaner(local, SETTINGS, clock=lambda: NOW).clean_now("t")
    directory = tmp_path / "remote" / "t"
    seen: list[set[str]] = []

    def hold_the_first_swap(step: str) -> None:
        if step != "cleaned" or seen:
            return
        deadline = time.monotonic() + 10
        while len(cleaned_logs(directory)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(cleaned_logs(directory))

    remote.get_log("t").swap_hook = hold_the_first_swap
    cleaner = LogCleaner(remote, SETTINGS, clock=lambda: NOW, passes=WorkerPasses(pool, SETTINGS))
    result = cleaner.clean_now("t")
    assert result.error is None
    assert len(seen) == 1 and len(seen[0]) == 2, f".cleaned logs during the first swap: {seen}"
    assert files(directory) == files(tmp_path / "local" / "t")
    assert not list(directory.glob(f"*{CLEANED}"))
    local.close()
    remote.close()


def filled_distinct(root: Path) -> SegmentedLogManager:
    m = SegmentedLogManager(root, SETTINGS, clock=lambda: NOW, start_threads=False)
    m.create_topic("t", COMPACT)
    for i in range(12):
        m.append("t", [Record(b"k%d" % i, b"v" * 60)])
    m.get_log("t").roll()
    return m


def cleaned_logs(directory: Path) -> set[str]:
    return {p.name for p in directory.glob(f"*.log{CLEANED}")}
