"""``segments.manifest``: sealed segments recorded when sealed, replaced or deleted, and
checked at start, so damage that removes data is detected (CONTRACT section 11) — real
files, cut and deleted for real."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from compactlog.compactor.log_cleaner import LogCleaner
from compactlog.errors import CorruptData, OffsetOutOfRange
from compactlog.storage.check import CheckReport
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.segmented.check import check_segments
from compactlog.storage.segmented.manifest import MANIFEST_FILE, decode
from compactlog.storage.segmented.manifest_check import Figures
from compactlog.storage.segmented.state_file import read
from compactlog.storage.types import Record

SETTINGS = ServerSettings(topic_defaults={})
SMALL = {"segment.bytes": "300", "index.interval.bytes": "1"}
EXPECTED = [b"value-%03d" % i for i in range(40)]
# compact,delete: a pass writes each group into a .cleaned segment of its own (a log
# compacted alone joins groups whose survivors fit: ``joins``), so it swaps several times
SEPARATE_SWAPS = {"cleanup.policy": "compact,delete", "retention.ms": "-1"}


def open_manager(root: Path) -> SegmentedLogManager:
    return SegmentedLogManager(root, SETTINGS, start_threads=False)


def filled(root: Path, config: dict[str, str] = SMALL) -> SegmentedLogManager:
    """Forty one-record batches, two to a segment: offsets 2i and 2i+1 in segment 2i."""
    m = open_manager(root)
    m.create_topic("t", config)
    for i in range(40):
        m.append("t", [Record(b"k%d" % (i % 5), b"value-%03d" % i, None, 1000 + i)])
    return m


def entries(root: Path) -> dict[int, Figures]:
    body = read(root / "t" / MANIFEST_FILE)
    assert body is not None
    listed, swap = decode(root / "t" / MANIFEST_FILE, body)
    assert swap is None
    return listed


def logs(root: Path) -> list[Path]:
    return sorted((root / "t").glob("*.log"))


def values(m: SegmentedLogManager, start: int = 0) -> list[bytes | None]:
    return [msg.value for msg in m.read("t", start, 0)]


def check(root: Path) -> CheckReport:
    report = CheckReport()
    check_segments(root, report)
    return report


# ---- written at roll, retention, DeleteRecords and swaps -------------------------------


def test_every_sealed_segment_is_listed_when_sealed_and_never_the_active_one(
    tmp_path: Path,
) -> None:
    m = filled(tmp_path)
    listed = entries(tmp_path)
    bases = [int(p.name[:20]) for p in logs(tmp_path)]
    assert sorted(listed) == bases[:-1]  # every sealed one; not the active one
    assert listed[4] == Figures(4, 5, logs(tmp_path)[2].stat().st_size, 2, 1005)
    m.close()
    assert check(tmp_path).ok


def test_retention_and_delete_records_drop_their_entries(tmp_path: Path) -> None:
    m = filled(tmp_path)
    m.delete_records("t", 11)  # segments 0..8 go, 10 holds the new log start
    assert min(entries(tmp_path)) == 10
    m.update_config("t", {**SMALL, "retention.bytes": "1000"})
    m.enforce_retention("t")
    kept = [s.base_offset for s in m.get_log("t").segments]
    assert sorted(entries(tmp_path)) == kept[:-1]
    m.close()
    m = open_manager(tmp_path)  # nothing taken for lost
    assert values(m, m.log_start_offset("t")) == EXPECTED[kept[0] :]
    m.close()
    assert check(tmp_path).ok


def test_a_cleaner_swap_replaces_the_entries_of_the_segments_it_replaced(tmp_path: Path) -> None:
    config = {**SMALL, "cleanup.policy": "compact", "segment.bytes": "1000"}
    m = filled(tmp_path, config)
    before = entries(tmp_path)
    assert LogCleaner(m, SETTINGS).clean_now("t").error is None
    after = entries(tmp_path)
    assert after != before
    assert sorted(after) == [s.base_offset for s in m.get_log("t").segments[:-1]]
    cleaned = values(m)
    assert len(cleaned) < 40
    m.close()
    m = open_manager(tmp_path)
    assert values(m) == cleaned  # nothing taken for lost
    m.close()
    assert check(tmp_path).ok


@pytest.mark.parametrize("step", ["swapped", "deleted-0", "renamed"])
def test_a_crash_inside_a_swap_is_never_taken_for_lost_data(tmp_path: Path, step: str) -> None:
    """The manifest holds the swap under way from before its first rename: whichever
    files a crash leaves, they match it."""
    config = {**SMALL, "cleanup.policy": "compact", "segment.bytes": "1000"}
    m = filled(tmp_path, config)

    class Crash(BaseException):
        pass

    def hook(name: str) -> None:
        if name == step:
            raise Crash(name)

    m.get_log("t").swap_hook = hook
    with pytest.raises(Crash):
        LogCleaner(m, SETTINGS).clean_now("t")
    for one in m.logs().values():
        one.mark_deleted()  # the process dies: nothing flushed or written at close
    m = open_manager(tmp_path)
    m.get_log("t").check_nothing_lost()
    assert values(m)[-5:] == EXPECTED[-5:]
    m.close()
    assert check(tmp_path).ok


def test_a_crash_between_swaps_settles_the_swap_whose_entry_was_not_written(
    tmp_path: Path,
) -> None:
    """A swap's end is written with the next swap's start (one synced manifest write per
    swap): a crash between them leaves the file naming a finished swap as pending, and
    start-up settles it from the files."""
    config = {**SMALL, "segment.bytes": "1000"} | SEPARATE_SWAPS
    m = filled(tmp_path, config)
    path = tmp_path / "t" / MANIFEST_FILE
    at_crash: list[bytes] = []

    class Crash(BaseException):
        pass

    def hook(name: str) -> None:
        if name == "cleaned" and (at_crash or not m.get_log("t").manifest.swap):
            at_crash.append(path.read_bytes())  # what a kill -9 now leaves on disk
            if len(at_crash) == 2:
                raise Crash(name)

    m.get_log("t").swap_hook = hook
    with pytest.raises(Crash):
        LogCleaner(m, SETTINGS).clean_now("t")
    for one in m.logs().values():
        one.mark_deleted()  # the process dies: nothing flushed or written at close
    path.write_bytes(at_crash[-1])
    body = read(path)
    assert body is not None
    _listed, pending = decode(path, body)
    assert pending is not None  # the first swap is done, the file does not say so yet
    m = open_manager(tmp_path)
    m.get_log("t").check_nothing_lost()
    assert values(m)[-5:] == EXPECTED[-5:]
    assert sorted(entries(tmp_path)) == [s.base_offset for s in m.get_log("t").segments[:-1]]
    m.close()
    assert check(tmp_path).ok


def test_a_pass_leaves_no_swap_pending_in_the_file(tmp_path: Path) -> None:
    config = {**SMALL, "segment.bytes": "1000"} | SEPARATE_SWAPS
    m = filled(tmp_path, config)
    swaps: list[str] = []
    m.get_log("t").swap_hook = swaps.append
    assert LogCleaner(m, SETTINGS).clean_now("t").error is None
    assert swaps.count("renamed") >= 2  # several swaps in one pass
    entries(tmp_path)  # asserts the file names no pending swap
    assert sorted(entries(tmp_path)) == [s.base_offset for s in m.get_log("t").segments[:-1]]
    m.close()


# ---- damage that removes data ----------------------------------------------------------

CUTS = {
    "emptied": lambda size: 0,
    "half": lambda size: size // 2,
    "one byte": lambda size: size - 1,
}


@pytest.mark.parametrize("damage", [*CUTS, "deleted"])
def test_a_sealed_segment_cut_or_deleted_is_data_loss_never_a_shorter_read(
    tmp_path: Path, damage: str
) -> None:
    filled(tmp_path, {**SMALL, "cleanup.policy": "compact,delete"}).close()
    target = logs(tmp_path)[5]  # offsets 10 and 11
    if damage == "deleted":
        target.unlink()
    else:
        os.truncate(target, CUTS[damage](target.stat().st_size))
    m = open_manager(tmp_path)
    with pytest.raises(CorruptData) as failed:
        m.read("t", 0, 0)
    meta = failed.value.metadata
    assert meta["topic"] == "t" and meta["path"].endswith(target.name)
    assert int(meta["first_offset"]) in (10, 11) and meta["last_offset"] == "11"
    assert values(m, 12) == EXPECTED[12:]  # the rest reads right
    assert [x.value for x in m.read("t", 0, 10)] == EXPECTED[:10]
    with pytest.raises(CorruptData):
        m.offset_for_timestamp("t", 1011)
    assert m.offset_for_timestamp("t", 1013) == 13
    assert m.stats("t").segments == 20  # describing it still answers
    assert m.append("t", [Record(b"k", b"more")]).base_offset == 40  # offsets never reused
    with pytest.raises(CorruptData):
        LogCleaner(m, SETTINGS).preview("t")
    m.close()
    report = check(tmp_path)
    (line,) = [p for p in report.problems if target.name in p]
    assert "offsets 1" in line and "lost" in line
    m = open_manager(tmp_path)  # still detected at the next start
    with pytest.raises(CorruptData):
        m.read("t", 0, 0)
    m.delete_records("t", 12)  # the operator gives the range up: the log reads whole again
    assert values(m, 12) == [*EXPECTED[12:], b"more"]
    with pytest.raises(OffsetOutOfRange):
        m.read("t", 10, 0)
    m.close()
    assert check(tmp_path).ok


def test_the_active_segment_gone_starts_a_new_one_after_the_sealed(tmp_path: Path) -> None:
    filled(tmp_path).close()
    last = logs(tmp_path)[-1]
    last.unlink()
    m = open_manager(tmp_path)  # its offsets were synced (the recovery point): offline
    assert "every offset below 40 was synced" in m.offline_topics()["t"].reason
    m.close()
    (tmp_path / "t" / "recovery-point").unlink()  # a crash before anything was synced there
    m = open_manager(tmp_path)
    assert values(m) == EXPECTED[:38]
    assert m.append("t", [Record(b"k", b"x")]).base_offset >= 38
    m.close()


# ---- the manifest itself ---------------------------------------------------------------


def test_a_missing_manifest_is_built_from_the_segments_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A data dir from before the manifest opens as it did, and gains one."""
    filled(tmp_path).close()
    listed = entries(tmp_path)
    (tmp_path / "t" / MANIFEST_FILE).unlink()
    assert "missing" in " ".join(check(tmp_path).notes) and check(tmp_path).ok
    with caplog.at_level(logging.INFO, logger="compactlog.storage.segmented"):
        m = open_manager(tmp_path)
        assert values(m) == EXPECTED
        m.close()
        open_manager(tmp_path).close()
    built = [r for r in caplog.records if "built from 19 sealed segments" in r.getMessage()]
    assert len(built) == 1
    assert entries(tmp_path) == listed


@pytest.mark.parametrize("damage", ["torn", "flipped", "emptied"])
def test_a_damaged_manifest_is_set_aside_and_rebuilt_from_whole_segments(
    tmp_path: Path, damage: str
) -> None:
    filled(tmp_path).close()
    listed = entries(tmp_path)
    path = tmp_path / "t" / MANIFEST_FILE
    data = bytearray(path.read_bytes())
    if damage == "flipped":
        data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data[: len(data) // 2] if damage == "torn" else data[:0]))
    if damage == "flipped":
        path.write_bytes(bytes(data))
    assert any(MANIFEST_FILE in p for p in check(tmp_path).problems)
    m = open_manager(tmp_path)
    assert values(m) == EXPECTED
    m.close()
    assert entries(tmp_path) == listed
    assert len(list((tmp_path / "t").glob(MANIFEST_FILE + ".bad-*"))) == 1


def test_no_manifest_is_built_over_a_segment_that_is_not_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    filled(tmp_path).close()
    (tmp_path / "t" / MANIFEST_FILE).unlink()
    target = logs(tmp_path)[3]
    data = bytearray(target.read_bytes())
    data[40] ^= 0xFF
    target.write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR, logger="compactlog.storage.segmented"):
        m = open_manager(tmp_path)  # opens: no traceback, no manifest
    assert any("not built" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "t" / MANIFEST_FILE).exists()
    with pytest.raises(CorruptData):
        m.read("t", 0, 0)
    assert values(m, 8) == EXPECTED[8:]
    m.close()
