"""A SEGMENTED log on a disk that fills up, and a descriptor that refuses writes: a batch
is stored whole or not at all, never acknowledged half-written (CONTRACT section 11).

Real faults: a tmpfs of a few hundred KB (ENOSPC, short writes as Linux gives them) and
an index descriptor opened read-only (EBADF at the next entry).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from compactlog.errors import DiskFull, StorageUnavailable
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.segmented.scan import iter_batches
from compactlog.storage.segmented.topic_log import SegmentedTopicLog
from compactlog.storage.types import MessageId, Record

SETTINGS = ServerSettings(topic_defaults={})
VALUE = b"v" * 3000  # a batch of 10 records is about 30 KB: many pages a write


def open_manager(root: Path) -> SegmentedLogManager:
    return SegmentedLogManager(root, SETTINGS, start_threads=False)


def batch(i: int) -> list[Record]:
    return [Record(b"k%d" % (i * 10 + j), VALUE) for j in range(10)]


def publish_until_full(m: SegmentedLogManager, topic: str) -> tuple[list[int], DiskFull]:
    """Append batches until the disk refuses one: the offsets acknowledged, the error."""
    acked: list[int] = []
    for i in range(10_000):
        try:
            acked += m.append(topic, batch(i)).offsets
        except DiskFull as full:
            return acked, full
    raise AssertionError("the disk never filled")


def whole_batches(log_file: Path) -> int:
    """The file's size once every batch in it is checked: a torn tail would fail."""
    size = log_file.stat().st_size
    data = log_file.read_bytes()
    ends = [
        pos + header.size
        for _buf, _p, header, pos in iter_batches(
            lambda n, at: data[at : at + n], 0, size, str(log_file)
        )
    ]
    assert ends[-1:] == [size] or size == 0  # CorruptData above for a torn or bad tail
    return size


def test_a_full_disk_keeps_every_acknowledged_batch_and_nothing_partial(small_disk) -> None:  # type: ignore[no-untyped-def]
    disk = small_disk(1 << 20)
    root = disk.path / "data"
    m = open_manager(root)
    m.create_topic("t", {"segment.bytes": str(1 << 30), "flush.messages": "1"})
    disk.fill(leave=200_000)  # room for a few batches, then a batch that only partly fits
    acked, full = publish_until_full(m, "t")
    assert acked, "some batches fit before the disk was full"
    assert full.reason == "DISK_FULL" and full.metadata["errno"] == "ENOSPC"
    assert full.metadata["path"].endswith(".log")
    log_file = root / "t" / f"{0:020d}.log"
    size_full = whole_batches(log_file)  # the failed batch was cut back: no torn tail
    assert [r.id.entry_id for r in m.read("t", 0, 0)] == acked

    disk.free()  # space is back: the next append works, right after the last acknowledged
    more = m.append("t", batch(99_999)).offsets
    assert more[0] == acked[-1] + 1
    assert whole_batches(log_file) > size_full
    m.close()

    m = open_manager(root)  # and after a restart nothing is lost, nothing is damaged
    assert [r.id.entry_id for r in m.read("t", 0, 0)] == [*acked, *more]
    m.close()


def test_a_disk_full_at_every_size_never_leaves_a_torn_tail(small_disk) -> None:  # type: ignore[no-untyped-def]
    """The failing write lands part of its batch (a short write, then ENOSPC) wherever the
    free space ends; each time the log is cut back to its last whole batch."""
    disk = small_disk(1 << 20)
    for leave in (0, 5_000, 17_000, 33_000, 65_000):
        root = disk.path / f"data-{leave}"
        m = open_manager(root)
        m.create_topic("t", {"segment.bytes": str(1 << 30)})
        disk.fill(leave=leave)
        acked, _full = publish_until_full(m, "t")
        log_file = root / "t" / f"{0:020d}.log"
        whole_batches(log_file)
        assert [r.id.entry_id for r in m.read("t", 0, 0)] == acked
        m.close()
        disk.free()
        m = open_manager(root)  # recovery finds nothing to truncate, nothing missing
        assert [r.id.entry_id for r in m.read("t", 0, 0)] == acked
        m.close()


def test_an_index_entry_that_cannot_be_written_undoes_its_batch(tmp_path: Path) -> None:
    m = open_manager(tmp_path)
    m.create_topic("t", {"index.interval.bytes": "0", "segment.bytes": str(1 << 30)})
    first = m.append("t", batch(0)).offsets
    segment = m.get_log("t").active_segment
    size, entries = segment.size, segment.offset_index.entries
    index = segment.offset_index
    index_file = index.path
    index.close()  # its descriptor goes; the next entry opens the file by name again
    index_file.rename(tmp_path / "index-aside")
    index_file.mkdir()  # and finds a directory there: EISDIR
    with pytest.raises(StorageUnavailable) as refused:
        m.append("t", batch(1))
    assert refused.value.metadata["errno"] == "EISDIR"
    assert refused.value.metadata["path"].endswith(".index")
    assert (segment.size, segment.offset_index.entries) == (size, entries)
    assert (tmp_path / "t" / f"{0:020d}.log").stat().st_size == size
    index_file.rmdir()
    (tmp_path / "index-aside").rename(index_file)
    assert index_file.stat().st_size == entries * 8
    again = m.append("t", batch(1)).offsets  # the file is back: same offsets as refused
    assert again[0] == first[-1] + 1
    assert [r.id.entry_id for r in m.read("t", 0, 0)] == [*first, *again]
    m.close()


def test_an_ack_the_disk_cannot_take_leaves_the_journal_whole(small_disk) -> None:  # type: ignore[no-untyped-def]
    """A cursor journal line a full disk refuses (or cuts short) is cut back: DISK_FULL,
    the journal readable, the acks before it kept, and acks work again once space is back;
    a close on the full disk keeps the journal as it was."""
    disk = small_disk(1 << 20)
    root = disk.path / "data"
    m = open_manager(root)
    m.create_topic("t", {})
    for i in range(30):
        m.append("t", batch(i))
    log = SegmentedTopicLog(m, "t")
    log.delivered(log.open_cursor("s", latest=False), MessageId(0, 299))
    log.acknowledge("s", MessageId(0, 1), cumulative=False)
    journal = root / "t" / "cursors.journal"
    disk.fill(leave=0)
    acks = [MessageId(0, i) for i in range(3, 299, 2)]  # more lines than a page holds
    refused = None
    for ack in acks:  # the page the journal ends in may take a few lines first
        try:
            log.acknowledge("s", ack, cumulative=False)
        except DiskFull as full:
            refused = full
            break
    assert refused is not None and refused.metadata["path"].endswith("cursors.journal")
    kept = journal.read_bytes()
    assert kept.endswith(b"\n")  # no partial line
    m.close()  # the fold into a snapshot finds no room: logged, journal untouched
    assert journal.read_bytes() == kept
    disk.free()
    m = open_manager(root)  # every ack answered before the refusal is there, nothing torn
    acked = m.cursors("t").open("s", None).acked
    assert MessageId(0, 1) in {s for s, _e in acked}
    log = SegmentedTopicLog(m, "t")
    log.delivered(log.open_cursor("s", latest=False), MessageId(0, 299))
    log.acknowledge("s", MessageId(0, 298), cumulative=False)  # space is back
    m.close()
