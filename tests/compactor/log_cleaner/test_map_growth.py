"""A pass whose offset map grows as keys come (``SkimpyOffsetMap.fit``) cleans a log into
the very bytes a map of the whole fitted table does."""

from __future__ import annotations

import random
from pathlib import Path

from compactlog.compactor.log_cleaner import LogCleaner
from compactlog.compactor.log_cleaner.offset_map import SkimpyOffsetMap
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.types import Record

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "20000", "retention.ms": "-1"}
RECORDS, KEYS = 6_000, 3_000


def clean(root: Path, buffer: int) -> tuple[dict[str, bytes], tuple[int, ...]]:
    """The log's files after one pass with a dedupe buffer of ``buffer`` bytes, and the
    pass's figures."""
    s = ServerSettings(topic_defaults={}, log_cleaner_dedupe_buffer_size=buffer)
    m = SegmentedLogManager(root, s, clock=lambda: 1_700_000_000.0, start_threads=False)
    m.create_topic("t", COMPACT)
    rng = random.Random(7)
    for start in range(0, RECORDS, 100):
        batch = []
        for i in range(start, start + 100):
            k = rng.randrange(KEYS + 50)
            key = None if k >= KEYS else b"k%d" % k
            value = None if i % 17 == 0 else b"v%d" % i
            batch.append(Record(key, value))
        m.append("t", batch)
    m.get_log("t").roll()
    r = LogCleaner(m, s, clock=lambda: 1_700_000_000.0).clean_now("t")
    assert r.error is None and r.kept < r.read
    figures = (r.read, r.kept, r.removed, r.keyless_dropped, r.bytes_in, r.bytes_out)
    m.close()
    files = {p.name: p.read_bytes() for p in (root / "t").iterdir() if p.suffix != ".json"}
    return files, figures


def test_a_growing_map_cleans_to_the_same_bytes_as_the_whole_table(tmp_path: Path) -> None:
    probe = SkimpyOffsetMap(24 * 10**6, 0.9, lazy=True)
    probe.fit(RECORDS + 1)
    fitted = probe.fit_slots  # the pass's table: grown to from 1,021 slots with 24 MB
    whole = clean(tmp_path / "whole", 24 * (fitted + 10))  # two of it do not fit: taken whole
    grown = clean(tmp_path / "grown", 24 * 10**6)
    assert grown == whole
    assert any(n.endswith(".log") for n in grown[0])
