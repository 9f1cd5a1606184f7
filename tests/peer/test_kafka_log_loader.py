"""Port of Kafka's ``LogLoaderTest`` (core, kafka.log): behaviour only, recovery of a
SEGMENTED log on real files. A torn or garbage tail is cut at the last whole batch after
an unclean shutdown, missing or corrupt indexes are rebuilt, index files without a
segment go, obsolete ``.deleted`` / ``.cleaned`` files go, and a server killed with
``kill -9`` comes back with every acknowledged record at its offset. Producer state,
leader epochs and transaction indexes do not apply (none here)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from compactlog.client import Client
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.types import Record
from tests.conftest import ServerProcess

SETTINGS = ServerSettings(topic_defaults={})
T0_MS = 1_700_000_000_000
SMALL = {"segment.bytes": "1000", "index.interval.bytes": "1", "retention.ms": "-1"}


class Clock:
    def __init__(self) -> None:
        self.now = T0_MS / 1000

    def __call__(self) -> float:
        return self.now


def open_manager(root: Path) -> SegmentedLogManager:
    return SegmentedLogManager(root, SETTINGS, clock=Clock(), start_threads=False)


def crash(m: SegmentedLogManager) -> None:
    """Drop the manager without a clean shutdown (no recovery point written)."""
    for log in m.logs().values():
        log.mark_deleted()


def filled(root: Path, n: int) -> SegmentedLogManager:
    """A topic ``t`` of ``n`` records over several segments, record i at time T0 + 10 i."""
    m = open_manager(root)
    m.create_topic("t", SMALL)
    for i in range(n):
        m.append("t", [Record(b"k%d" % i, b"value-%d" % i, event_time_ms=T0_MS + 10 * i)])
    assert len(m.get_log("t").segments) > 2
    return m


def files(root: Path, *exts: str) -> list[Path]:
    return sorted(p for p in (root / "t").iterdir() if p.suffix in exts)


def assert_whole(m: SegmentedLogManager, n: int) -> None:
    """Every record readable at its offset, and found by its time (through the index)."""
    assert [x.id.entry_id for x in m.read("t", 0, 0)] == list(range(n))
    for i in range(n):
        assert m.read("t", i, 1)[0].id.entry_id == i
        assert m.offset_for_timestamp("t", T0_MS + 10 * i) == i
    assert m.log_end_offset("t") == n


def test_corrupt_log(tmp_path: Path) -> None:
    """LogLoaderTest.testCorruptLog: garbage appended to the last segment after an unclean
    shutdown is cut off at reopen; the records before it and later appends are whole."""
    rng = random.Random(5)
    for attempt in range(5):
        root = tmp_path / str(attempt)
        m = filled(root, 50)
        last = files(root, ".log")[-1]
        crash(m)
        with last.open("ab") as f:
            f.write(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))))
        m = open_manager(root)
        assert_whole(m, 50)
        assert m.append("t", [Record(b"k", b"after")]).offsets == [50]
        m.close()


def test_torn_tail_after_unclean_shutdown(tmp_path: Path) -> None:
    """LogLoaderTest.testLogRecoversToCorrectOffset, with the last batch torn in half:
    the log end is the last whole record's offset + 1."""
    m = filled(tmp_path, 50)
    last = files(tmp_path, ".log")[-1]
    crash(m)
    size = last.stat().st_size
    os.truncate(last, size - 10)
    m = open_manager(tmp_path)
    assert_whole(m, 49)
    m.close()


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_index_rebuild(tmp_path: Path, damage: str) -> None:
    """LogLoaderTest.testIndexRebuild (every index file deleted) and
    testCorruptIndexRebuild (every index file overwritten with two spaces): reopened
    after an unclean shutdown, reads by offset and by time find every record."""
    m = filled(tmp_path, 50)
    crash(m)
    indexes = files(tmp_path, ".index", ".timeindex")
    assert indexes
    for path in indexes:
        if damage == "missing":
            path.unlink()
        else:
            path.write_bytes(b"  ")
    m = open_manager(tmp_path)
    assert_whole(m, 50)
    m.close()


def test_bogus_index_segments_are_removed(tmp_path: Path) -> None:
    """LogLoaderTest.testBogusIndexSegmentsAreRemoved: index files of a segment that does
    not exist are deleted at open; the log still appends."""
    m = filled(tmp_path, 20)
    m.close()
    bogus = [tmp_path / "t" / f"{99999:020d}{ext}" for ext in (".index", ".timeindex")]
    for path in bogus:
        path.write_bytes(b"")
    m = open_manager(tmp_path)
    assert not any(p.exists() for p in bogus)
    assert m.append("t", [Record(b"k", b"v")]).offsets == [20]
    assert [x.id.entry_id for x in m.read("t", 0, 0)] == list(range(21))
    m.close()


def test_open_deletes_obsolete_files(tmp_path: Path) -> None:
    """LogLoaderTest.testOpenDeletesObsoleteFiles: ``.deleted`` and ``.cleaned`` files
    left by a crash are removed at open and the log is as it was."""
    m = filled(tmp_path, 30)
    m.close()
    first = files(tmp_path, ".log")[0]
    cleaned = first.with_name(f"{5:020d}.log.cleaned")
    leftovers = [first.with_name(first.name + ".deleted"), cleaned]
    for path in leftovers:
        path.write_bytes(b"stale")
    m = open_manager(tmp_path)
    assert not any(p.exists() for p in leftovers)
    assert_whole(m, 30)
    m.close()


@pytest.mark.slow
def test_kill_9_keeps_every_acknowledged_record(server: ServerProcess, unique_topic: str) -> None:
    """LogLoaderTest.testLogRecoversToCorrectOffset through a real server killed with
    ``kill -9`` between publishes: every acknowledged record is read back at its offset
    and the next publish takes the next offset."""
    with Client(server.address) as client:
        client.create_topic(unique_topic, "segmented", {"segment.bytes": "4096"})
        producer = client.create_producer(unique_topic)
        ids = [producer.send(b"v%d" % i, partition_key=f"k{i}") for i in range(300)]
    server.kill()
    server.start()
    with Client(server.address) as client:
        read = list(client.reader(unique_topic))
        assert [m.message_id() for m in read] == ids
        assert [m.data() for m in read] == [b"v%d" % i for i in range(300)]
        after = client.create_producer(unique_topic).send(b"after")
        assert after.entry_id() == 300
