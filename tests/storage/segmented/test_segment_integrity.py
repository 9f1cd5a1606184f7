"""SEGMENTED topics trust nothing read back (CONTRACT sections 11 and 12) — real files.

Swaps are validated before they replace anything, state files carry checksums, a topic
whose state cannot be read goes offline alone, index entries are checked at use, and
segment files are reached through a bounded LRU of descriptors.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from compactlog.errors import CorruptData
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager, state_file
from compactlog.storage.segmented.handles import HANDLES
from compactlog.storage.segmented.state_file import BadStateFile
from compactlog.storage.types import Record

SETTINGS = ServerSettings(topic_defaults={})
SMALL = {"segment.bytes": "300", "index.interval.bytes": "1"}


def open_manager(root: Path, settings: ServerSettings = SETTINGS) -> SegmentedLogManager:
    return SegmentedLogManager(root, settings, start_threads=False)


def filled(root: Path, n: int = 40, topics: tuple[str, ...] = ("t",)) -> SegmentedLogManager:
    m = open_manager(root)
    for name in topics:
        m.create_topic(name, SMALL)
        for i in range(n):
            m.append(name, [Record(b"k%d" % (i % 5), b"value-%03d" % i, None, 1000 + i)])
    return m


def values(m: SegmentedLogManager, topic: str = "t", start: int = 0) -> list[bytes | None]:
    return [msg.value for msg in m.read(topic, start, 0)]


def flip(path: Path, position: int, mask: int = 0xFF) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


def logs(root: Path, topic: str = "t") -> list[Path]:
    return sorted((root / topic).glob("*.log"))


EXPECTED = [b"value-%03d" % i for i in range(40)]


# ---- swaps -------------------------------------------------------------------------------


@pytest.mark.parametrize("originals", ["live", "deleted"])
def test_a_damaged_swap_never_replaces_live_data(tmp_path: Path, originals: str) -> None:
    filled(tmp_path).close()
    target = logs(tmp_path)[1]
    garbage = bytearray(target.read_bytes())
    garbage[len(garbage) // 2] ^= 0xFF
    if originals == "deleted":  # a crash after the old segments became .deleted
        for ext in (".log", ".index", ".timeindex"):
            src = target.with_suffix(ext)
            src.rename(src.with_name(src.name + ".deleted"))
    target.with_name(target.name + ".swap").write_bytes(bytes(garbage))
    m = open_manager(tmp_path)
    assert values(m) == EXPECTED
    assert len(list((tmp_path / "t").glob("*.swap.bad-*"))) == 1
    assert not list((tmp_path / "t").glob("*.swap")) and not list(
        (tmp_path / "t").glob("*.deleted")
    )
    m.close()


def test_a_damaged_swap_whose_originals_are_gone_takes_the_topic_offline(tmp_path: Path) -> None:
    filled(tmp_path, topics=("t", "u")).close()
    target = logs(tmp_path)[1]
    garbage = bytearray(target.read_bytes())
    garbage[10] ^= 0xFF
    for ext in (".log", ".index", ".timeindex"):
        target.with_suffix(ext).unlink()
    target.with_name(target.name + ".swap").write_bytes(bytes(garbage))
    m = open_manager(tmp_path)
    assert m.has_topic("t") and "t" not in m.topic_names()
    assert "cannot be read" in m.offline_topics()["t"].reason
    with pytest.raises(CorruptData, match="offline"):
        m.read("t", 0, 0)
    assert values(m, "u") == EXPECTED  # the other topic is served
    m.close()


# ---- state files -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cursors.json", "topic.json", "log-start-offset"])
def test_a_damaged_state_file_takes_only_its_topic_offline(tmp_path: Path, name: str) -> None:
    m = filled(tmp_path, topics=("t", "u"))
    m.cursors("t").open("sub", None)
    m.delete_records("t", 3)
    m.close()
    path = tmp_path / "t" / name
    flip(path, 2, 0x01)
    before = {p.name: p.read_bytes() for p in (tmp_path / "t").iterdir()}
    m = open_manager(tmp_path)
    assert "t" in m.offline_topics() and name in m.offline_topics()["t"].reason
    assert values(m, "u") == EXPECTED
    after = {p.name: p.read_bytes() for p in (tmp_path / "t").iterdir()}
    assert after == before  # left exactly as it was: nothing of the topic was touched
    m.delete_topic("t")  # the operator gives up on it
    assert not m.has_topic("t") and not (tmp_path / "t").exists()
    m.close()


def test_a_damaged_recovery_point_is_set_aside(tmp_path: Path) -> None:
    filled(tmp_path).close()
    flip(tmp_path / "t" / "recovery-point", 0, 0x01)
    m = open_manager(tmp_path)
    assert values(m) == EXPECTED
    assert len(list((tmp_path / "t").glob("recovery-point.bad-*"))) == 1
    assert state_file.read_int(tmp_path / "t" / "recovery-point") == 40
    m.close()


@pytest.mark.parametrize("how", ["emptied", "deleted"])
def test_a_last_segment_that_lost_synced_offsets_takes_its_topic_offline(
    tmp_path: Path, how: str
) -> None:
    """Below the recovery point every offset was synced: a log ending there lost data that
    no crash can lose (issue 27), so it is never served short."""
    filled(tmp_path, topics=("t", "u")).close()
    last = logs(tmp_path)[-1]
    if how == "emptied":
        last.write_bytes(b"")
    else:
        last.unlink()
    m = open_manager(tmp_path)
    reason = m.offline_topics()["t"].reason
    assert "every offset below 40 was synced" in reason, reason
    assert values(m, "u") == EXPECTED
    m.close()


def test_state_files_catch_every_flip_and_read_legacy_files(tmp_path: Path) -> None:
    path = tmp_path / "f"
    state_file.write_int(path, 1234)
    good = path.read_bytes()
    for i in range(len(good)):
        for mask in (0x01, 0x20, 0xFF):
            damaged = bytearray(good)
            damaged[i] ^= mask
            path.write_bytes(bytes(damaged))
            with pytest.raises(BadStateFile):
                state_file.read_int(path)
    path.write_bytes(b"77\n")  # written before checksums
    assert state_file.read_int(path) == 77


def test_a_bad_format_file_refuses_the_start_in_one_line(tmp_path: Path) -> None:
    filled(tmp_path).close()
    (tmp_path / "~server" / "FORMAT").write_bytes(b"2\n\x00")
    with pytest.raises(Exception, match="not a format version") as info:
        open_manager(tmp_path)
    assert "\n" not in str(info.value)


# ---- segments and indexes ------------------------------------------------------------


def test_a_flipped_byte_in_a_sealed_segment_is_data_loss_never_a_short_read(
    tmp_path: Path,
) -> None:
    filled(tmp_path).close()
    target = logs(tmp_path)[2]
    flip(target, target.stat().st_size // 2)
    m = open_manager(tmp_path)
    assert target.stat().st_size > 0  # kept: start-up deletes nothing it could not read
    with pytest.raises(CorruptData, match=target.name):
        m.read("t", 0, 0)
    assert m.stats("t").segments == len(logs(tmp_path))  # describing still works
    m.close()


def test_a_wrong_offset_index_entry_never_skips_records(tmp_path: Path) -> None:
    m = open_manager(tmp_path)
    m.create_topic("t", {"segment.bytes": "100000", "index.interval.bytes": "1"})
    for i in range(40):
        m.append("t", [Record(b"k", b"value-%03d" % i)])
    m.get_log("t").roll()  # the last segment's indexes are rebuilt at start: seal this one
    m.close()
    index = tmp_path / "t" / "00000000000000000000.index"
    entries = list(struct.iter_unpack(">II", index.read_bytes()))
    # the entry of offset 11 now points at batch 12's start (12's entry dropped to keep the
    # file sorted): it passes the load-time sanity check; a lookup of 11 would skip record 11
    assert entries[10][0] == 11
    entries[10] = (entries[10][0], entries[11][1])
    del entries[11]
    index.write_bytes(b"".join(struct.pack(">II", *e) for e in entries))
    m = open_manager(tmp_path)
    assert values(m, start=11) == EXPECTED[11:]
    assert values(m, start=25) == EXPECTED[25:]
    m.close()


def test_a_wrong_time_index_entry_never_skips_records(tmp_path: Path) -> None:
    m = open_manager(tmp_path)
    m.create_topic("t", {"segment.bytes": "100000", "index.interval.bytes": "1"})
    for i in range(40):
        m.append("t", [Record(b"k", b"v%d" % i, None, 1000 + 10 * i)])
    m.get_log("t").roll()
    m.close()
    tindex = tmp_path / "t" / "00000000000000000000.timeindex"
    entries = list(struct.iter_unpack(">qI", tindex.read_bytes()))
    # sorted by time, so it loads; but it sends a lookup of 1210 past offset 21 (time 1210)
    assert entries[20] == (1210, 21)
    entries[20] = (1201, 25)
    tindex.write_bytes(b"".join(struct.pack(">qI", *e) for e in entries))
    m = open_manager(tmp_path)
    for i in range(40):
        assert m.offset_for_timestamp("t", 1000 + 10 * i) == i
    m.close()


# ---- the LRU of descriptors --------------------------------------------------------------


def test_open_segment_files_stay_under_the_bound(tmp_path: Path) -> None:
    settings = ServerSettings(topic_defaults={}, log_segment_open_files_max=8)
    m = open_manager(tmp_path, settings)
    m.create_topic("t", {"segment.bytes": "14"})
    for i in range(60):
        m.append("t", [Record(b"k", b"%d" % i)])
    assert m.stats("t").segments == 60
    assert HANDLES.open_count <= 8
    pid_fds = len(os.listdir("/proc/self/fd"))
    assert [v for v in values(m)] == [b"%d" % i for i in range(60)]
    assert HANDLES.open_count <= 8 and len(os.listdir("/proc/self/fd")) <= pid_fds + 2
    m.close()
    m = open_manager(tmp_path, settings)
    assert HANDLES.open_count <= 8
    assert len(values(m)) == 60
    m.close()


def test_a_reader_keeps_reading_across_deletion_of_its_snapshot(tmp_path: Path) -> None:
    settings = ServerSettings(topic_defaults={}, log_segment_open_files_max=8)
    m = open_manager(tmp_path, settings)
    m.create_topic("t", {"segment.bytes": "14", "file.delete.delay.ms": "0"})
    for i in range(30):
        m.append("t", [Record(b"k", b"%d" % i)])
    log = m.get_log("t")
    reader = log.batches(0, 30)
    first = [next(reader) for _ in range(3)]
    assert [h.first_id.entry_id for _b, h, _lo in first] == [0, 1, 2]
    m.delete_records("t", 10)  # segments 0..9 go: .deleted, then unlinked at once
    log.delete_expired_files(force=True)
    for seg in log.segments:  # and every descriptor is evicted
        seg.release()
    rest = [h.first_id.entry_id for _b, h, _lo in reader]
    assert rest == list(range(10, 30))  # resumed on a fresh snapshot at the log start
    m.close()


def test_a_damaged_segment_is_never_skipped_by_its_partial_figures(tmp_path: Path) -> None:
    """Recovery keeps a damaged sealed segment with figures (max timestamp, next offset)
    that stop at its damage; a timestamp seek must meet the damage, not answer with a
    later segment's offset, and time retention must not take the segment for old."""
    filled(tmp_path).close()
    target = logs(tmp_path)[2]
    base = int(target.name[:20])
    flip(target, target.stat().st_size - 5)  # its last batch: after its last index entry
    m = open_manager(tmp_path)
    seg = next(s for s in m.get_log("t").segments if s.base_offset == base)
    assert seg.damaged_at is not None
    last_in_target = int(logs(tmp_path)[3].name[:20]) - 1
    with pytest.raises(CorruptData):
        m.offset_for_timestamp("t", 1000 + last_in_target)
    assert seg.largest_timestamp() >= seg.last_modified_ms()
    m.close()


def test_a_lone_deleted_index_is_removed_at_start(tmp_path: Path) -> None:
    """A crash between renaming a retired segment's index files and its log (the log goes
    last) leaves ``.index.deleted`` files with a live log, or, after the log's unlink, none:
    start-up removes every ``.deleted`` file, as Kafka does, and the log reads as before."""
    m = SegmentedLogManager(tmp_path, SETTINGS, start_threads=False)
    m.create_topic("t", {"segment.bytes": "200"})
    for i in range(8):
        m.append("t", [Record(b"k", b"v%d" % i)])
    expected = [x.id.entry_id for x in m.read("t", 0, 0)]
    m.close()
    topic = tmp_path / "t"
    for name in ("00000000000000009999.index.deleted", "00000000000000009999.timeindex.deleted"):
        (topic / name).write_bytes(b"\0" * 8)
    live = sorted(topic.glob("*.index"))[0]
    (topic / (live.name + ".deleted")).write_bytes(live.read_bytes())
    m = SegmentedLogManager(tmp_path, SETTINGS, start_threads=False)
    assert not list(topic.glob("*.deleted"))
    assert [x.id.entry_id for x in m.read("t", 0, 0)] == expected
    m.close()


def test_an_empty_segment_recovered_after_a_crash_gets_no_stray_time_entry(
    tmp_path: Path,
) -> None:
    """A topic created, then the process killed before its first append: the recovery
    of its empty segment wrote a time index entry ``(-1, 0)`` that names no batch, which
    ``compactlog check`` then reported for ever once a record was appended."""
    from compactlog.storage.check import CheckReport
    from compactlog.storage.segmented.check import check_segments

    m = open_manager(tmp_path)
    m.create_topic("t", {})  # never closed: the next open recovers it
    again = open_manager(tmp_path)
    again.append("t", [Record(b"k", b"v", None, 1000)])
    again.close()
    report = CheckReport()
    check_segments(tmp_path, report)
    assert report.ok, report.problems
    assert values(open_manager(tmp_path)) == [b"v"]
