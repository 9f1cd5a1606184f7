"""A cleaner pass drops the segments it empties (as Kafka's cleaner deletes segments that
become empty): no zero-byte segment waits for a later pass. Offsets, reads at removed
offsets and the log start offset stay as they were, also after a restart; the first
segment stays (it holds the log start offset), the active one is never cleaned."""

from __future__ import annotations

from pathlib import Path

from compactlog.compactor.log_cleaner import LogCleaner
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.types import Record

# One record of this size fills a segment of segment.bytes=200: one segment a record,
# so that each segment is a group of its own in the pass.
BIG = b"v" * 150
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "200", "retention.ms": "-1"}


def open_all(root: Path) -> tuple[SegmentedLogManager, LogCleaner]:
    settings = ServerSettings(topic_defaults={}, log_cleaner_backoff_ms=10)
    m = SegmentedLogManager(root, settings, start_threads=False)
    return m, LogCleaner(m, settings)


def publish(m: SegmentedLogManager, keys: list[bytes]) -> None:
    for key in keys:
        m.append("t", [Record(key, BIG)])
    m.get_log("t").roll()  # the last record's segment is closed too: only it can be cleaned


def layout(m: SegmentedLogManager, root: Path) -> list[tuple[int, int]]:
    """(base offset, size) of every segment the log holds, checked against the files."""
    segments = [(s.base_offset, s.size) for s in m.get_log("t").segments]
    on_disk = sorted((int(p.stem), p.stat().st_size) for p in (root / "t").glob("*.log"))
    assert on_disk == segments
    return segments


def keys_from(m: SegmentedLogManager, offset: int) -> list[tuple[int, bytes | None]]:
    return [(x.id.entry_id, x.key) for x in m.read("t", offset, 0)]


def test_a_pass_drops_the_segments_it_empties(tmp_path: Path) -> None:
    m, cleaner = open_all(tmp_path)
    m.create_topic("t", COMPACT)
    publish(m, [b"X", b"A", b"B", b"A", b"B"])  # offsets 0..4, one segment each
    assert [base for base, _ in layout(m, tmp_path)] == [0, 1, 2, 3, 4, 5]

    result = cleaner.clean_now("t")

    assert (result.read, result.kept) == (5, 3)
    # A@1 and B@2 were superseded: their segments are gone, not left empty
    segments = layout(m, tmp_path)
    assert [base for base, _ in segments] == [0, 3, 4, 5]
    assert all(size > 0 for _, size in segments[:-1])  # only the active one is empty
    assert keys_from(m, 0) == [(0, b"X"), (3, b"A"), (4, b"B")]
    assert keys_from(m, 1) == [(3, b"A"), (4, b"B")]  # a removed offset reads the next one
    assert m.log_start_offset("t") == 0
    assert m.append("t", [Record(b"C", b"c")]).offsets == [5]
    m.close()

    again, _ = open_all(tmp_path)  # a restart sees the same log
    assert again.log_start_offset("t") == 0
    assert keys_from(again, 1) == [(3, b"A"), (4, b"B"), (5, b"C")]
    again.close()


def test_the_first_segment_stays_to_hold_the_log_start(tmp_path: Path) -> None:
    m, cleaner = open_all(tmp_path)
    m.create_topic("t", COMPACT)
    publish(m, [b"A", b"B", b"A", b"B", b"C"])
    cleaner.clean_now("t")
    segments = layout(m, tmp_path)
    # A@0 and B@1 went: the first segment stays (empty) so offset 0 still reads, the
    # second goes
    assert [base for base, _ in segments] == [0, 2, 3, 4, 5]
    assert keys_from(m, 0) == [(2, b"A"), (3, b"B"), (4, b"C")]
    assert m.log_start_offset("t") == 0
    m.close()
