"""A cleaner pass on several threads (``fanout``) writes exactly what one thread writes.

The data: segments of many small batches with an offset-index entry every few of them, so
that a pass cuts each segment into many pieces (``PIECE_BYTES`` made tiny) and digests
and rewrites them side by side. Each case cleans two copies of the same files, one on one
thread and one on four, and compares the segment files byte for byte.
"""

from __future__ import annotations

import logging
import random
import shutil
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.compactor.log_cleaner import LogCleaner, fanout
from compactlog.compactor.log_cleaner.batch_scan import COMPILED
from compactlog.compactor.log_cleaner.checkpoint import FILE_NAME, CleanerCheckpoint
from compactlog.compactor.log_cleaner.fanout import Fanout, Piece
from compactlog.compactor.log_cleaner.worker_pass import WorkerPasses
from compactlog.compactor.progress import LocalRunControl, Progress
from compactlog.compactor.workers import WorkerPool
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.segmented.version import server_file
from compactlog.storage.types import Record

NOW = 1_700_000_000.0
TOPIC = "t"
CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "60000",
    "index.interval.bytes": "300",
    "retention.ms": "-1",
    "delete.retention.ms": "86400000",
}

pytestmark = pytest.mark.skipif(not COMPILED, reason="threads need the compiled scans")


def open_at(root: Path, threads: int, buffer: int) -> tuple[SegmentedLogManager, LogCleaner]:
    s = ServerSettings(
        topic_defaults={},
        log_cleaner_dedupe_buffer_size=buffer,
        compaction_worker_threads=threads,
    )
    m = SegmentedLogManager(root, s, clock=lambda: NOW, start_threads=False)
    return m, LogCleaner(m, s, clock=lambda: NOW)


def fill(root: Path, seed: int) -> None:
    """Batches of 1-12 records over 40 keys, with tombstones, empty values and keyless."""
    m, _c = open_at(root, 1, 1 << 20)
    m.create_topic(TOPIC, CONFIG)
    rng = random.Random(seed)
    for _ in range(900):
        batch = []
        for _ in range(rng.randint(1, 12)):
            key = None if rng.random() < 0.05 else b"key-%d" % rng.randrange(40)
            value = rng.choice([None, b"", b"v" * rng.randint(1, 60)])
            batch.append(Record(key, value if rng.random() < 0.9 else None))
        m.append(TOPIC, batch)
    m.get_log(TOPIC).roll()
    m.close()


def files(root: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted((root / TOPIC).iterdir())
        if p.suffix in (".log", ".index", ".timeindex")
    }


def clean_copies(
    tmp_path: Path, seed: int, buffer: int = 1 << 20, corrupt: bool = False
) -> tuple[list[object], list[dict[str, bytes]]]:
    fill(tmp_path / "src", seed)
    results, after = [], []
    for threads in (1, 4):
        root = tmp_path / f"threads-{threads}"
        shutil.copytree(tmp_path / "src", root)
        if corrupt:
            point_an_index_entry_elsewhere(root)
        m, c = open_at(root, threads, buffer)
        results.append(c.clean_now(TOPIC))
        m.close()
        after.append(files(root))
    return results, after


@pytest.fixture(autouse=True)
def tiny_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "PIECE_BYTES", 2048)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_four_threads_write_the_bytes_one_thread_writes(tmp_path: Path, seed: int) -> None:
    results, after = clean_copies(tmp_path, seed)
    one, four = results
    assert one.error is None and four.error is None  # type: ignore[attr-defined]
    assert one.read > 5000 and one.kept < one.read  # type: ignore[attr-defined]
    assert (one.read, one.kept, one.removed, one.tombstones, one.keyless_dropped) == (  # type: ignore[attr-defined]
        four.read,  # type: ignore[attr-defined]
        four.kept,  # type: ignore[attr-defined]
        four.removed,  # type: ignore[attr-defined]
        four.tombstones,  # type: ignore[attr-defined]
        four.keyless_dropped,  # type: ignore[attr-defined]
    )
    assert len([n for n in after[0] if n.endswith(".log")]) > 1
    assert after[0] == after[1]


def test_a_map_that_fills_ends_the_pass_where_one_thread_ends_it(tmp_path: Path) -> None:
    # 24 B a slot, 0.9 of them used: room for 30 of the 40 keys, so each pass stops
    # where the map filled and the next one starts there
    fill(tmp_path / "src", 4)
    ends: list[list[int | None]] = []
    after = []
    for threads in (1, 4):
        root = tmp_path / f"threads-{threads}"
        shutil.copytree(tmp_path / "src", root)
        m, c = open_at(root, threads, 24 * 34)
        log_end = m.get_log(TOPIC).next_offset
        passes = []
        for _ in range(3):
            assert c.clean_now(TOPIC).error is None
            passes.append(CleanerCheckpoint(server_file(m.root, FILE_NAME)).get(TOPIC))
        m.close()
        ends.append(passes)
        after.append(files(root))
    assert ends[0] == ends[1]
    assert ends[0][0] is not None and ends[0][0] < ends[0][1] <= log_end  # type: ignore[operator]
    assert after[0] == after[1]


def point_an_index_entry_elsewhere(root: Path) -> None:
    """Give one entry of the first segment's offset index the position of the next
    entry: still ascending, so the index loads, but the batch there has another offset."""
    index = sorted((root / TOPIC).glob("*.index"))[0]
    data = bytearray(index.read_bytes())
    entry = struct.Struct(">II")
    assert len(data) >= 4 * entry.size
    rel2, _pos2 = entry.unpack_from(data, 2 * entry.size)
    _rel3, pos3 = entry.unpack_from(data, 3 * entry.size)
    entry.pack_into(data, 2 * entry.size, rel2, pos3 - 1)
    index.write_bytes(bytes(data))


def test_an_index_entry_pointing_elsewhere_is_distrusted_not_followed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    results, after = clean_copies(tmp_path, 5, corrupt=True)
    assert all(r.error is None for r in results)  # type: ignore[attr-defined]
    assert after[0] == after[1]
    assert any("offset index entry is wrong" in r.getMessage() for r in caplog.records)


def test_a_flipped_byte_in_a_middle_piece_fails_the_pass_and_changes_nothing(
    tmp_path: Path,
) -> None:
    fill(tmp_path, 6)
    log_file = sorted((tmp_path / TOPIC).glob("*.log"))[0]
    data = bytearray(log_file.read_bytes())
    at = len(data) // 2
    data[at] ^= 0x40
    log_file.write_bytes(bytes(data))
    before = files(tmp_path)
    m, c = open_at(tmp_path, 4, 1 << 20)
    result = c.clean_now(TOPIC)
    m.close()
    assert result.error is not None and "CRC" in result.error
    assert files(tmp_path) == before
    assert not list((tmp_path / TOPIC).glob("*.cleaned"))


@pytest.fixture(scope="module")
def flip_source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """A filled log, and the ``.log`` files a one-thread pass over it writes."""
    src = tmp_path_factory.mktemp("flip") / "src"
    fill(src, 8)
    ref = src.parent / "ref"
    shutil.copytree(src, ref)
    m, c = open_at(ref, 1, 1 << 20)
    assert c.clean_now(TOPIC).error is None
    m.close()
    return src, logs(ref)


def logs(root: Path) -> dict[str, bytes]:
    return {name: data for name, data in files(root).items() if name.endswith(".log")}


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ext=st.sampled_from([".log", ".index", ".timeindex"]),
    which=st.floats(0, 1, exclude_max=True),
    at=st.floats(0, 1, exclude_max=True),
    bit=st.integers(0, 7),
)
def test_a_flipped_bit_anywhere_is_caught_or_changes_nothing(
    flip_source: tuple[Path, dict[str, bytes]],
    tmp_path_factory: pytest.TempPathFactory,
    ext: str,
    which: float,
    at: float,
    bit: int,
) -> None:
    """A threaded pass over files with one bit flipped: in a ``.log`` (every byte is
    under a batch's length or CRC) the pass fails and changes nothing; in an index (a
    cache, checked at load and at each use) it writes what a pass over healthy files
    writes."""
    src, expected = flip_source
    root = tmp_path_factory.mktemp("case") / "d"
    shutil.copytree(src, root)
    victims = [p for p in sorted((root / TOPIC).glob(f"*{ext}")) if p.stat().st_size]
    victim = victims[int(which * len(victims))]
    data = bytearray(victim.read_bytes())
    data[int(at * len(data))] ^= 1 << bit
    victim.write_bytes(bytes(data))
    before = files(root)
    m, c = open_at(root, 4, 1 << 20)
    result = c.clean_now(TOPIC)
    m.close()
    if ext == ".log":
        assert result.error is not None
        assert logs(root) == {n: d for n, d in before.items() if n.endswith(".log")}
        assert not list((root / TOPIC).glob("*.cleaned"))
    else:
        assert result.error is None
        assert logs(root) == expected


def big_log(root: Path) -> None:
    """About 12 MB in one segment: three pieces of the real ``PIECE_BYTES``."""
    s = ServerSettings(topic_defaults={})
    m = SegmentedLogManager(root, s, clock=lambda: NOW, start_threads=False)
    m.create_topic(
        TOPIC, {**CONFIG, "segment.bytes": str(64 << 20), "index.interval.bytes": "4096"}
    )
    pad = b"p" * 100
    for start in range(0, 100_000, 1000):
        m.append(TOPIC, [Record(b"key-%d" % (i % 3000), pad) for i in range(start, start + 1000)])
    m.get_log(TOPIC).roll()
    m.close()


def test_a_pass_in_a_worker_process_on_four_threads_writes_what_one_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fanout, "PIECE_BYTES", 4 << 20)  # the worker's own value
    big_log(tmp_path / "src")
    after = []
    pool = WorkerPool(1)
    try:
        for threads, passes in ((1, None), (4, pool)):
            root = tmp_path / f"threads-{threads}"
            shutil.copytree(tmp_path / "src", root)
            s = ServerSettings(topic_defaults={}, compaction_worker_threads=threads)
            m = SegmentedLogManager(root, s, clock=lambda: NOW, start_threads=False)
            runner = WorkerPasses(passes, s) if passes is not None else None
            result = LogCleaner(m, s, clock=lambda: NOW, passes=runner).clean_now(TOPIC)
            assert result.error is None and result.read == 100_000 and result.kept == 3000
            m.close()
            after.append(files(root))
    finally:
        pool.close()
    assert after[0] == after[1]


def test_a_cancel_during_a_threaded_pass_stops_it_and_leaves_the_log_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big_log(tmp_path)
    before = files(tmp_path)
    threads_before = set(threading.enumerate())
    s = ServerSettings(topic_defaults={}, compaction_worker_threads=4)
    m = SegmentedLogManager(tmp_path, s, clock=lambda: NOW, start_threads=False)
    control = LocalRunControl()
    reports: list[int] = []
    real_report = control.report

    def report(progress: Progress) -> None:
        real_report(progress)
        reports.append(progress.done)
        if len(reports) == 4:  # in the middle of the map pass
            control.cancel()

    monkeypatch.setattr(control, "report", report)
    result = LogCleaner(m, s, clock=lambda: NOW).clean_now(TOPIC, control)
    m.close()
    assert result.error is not None and "cancel" in result.error.lower()
    assert 0 < reports[-1] < 100_000
    assert files(tmp_path) == before
    assert not list((tmp_path / TOPIC).glob("*.cleaned"))
    # the pass's threads ended with it (threads other tests of the process left are theirs)
    assert set(threading.enumerate()) - threads_before == set()


# ---- the fanout itself ------------------------------------------------------------------


class FakeSegment:
    index_trusted = False
    base_offset = 0


def test_results_come_back_in_order_whatever_order_threads_finish_in() -> None:
    def scan(piece: Piece) -> Iterator[int]:
        time.sleep(random.random() / 500)
        yield piece.start
        yield piece.end

    pieces = [Piece(FakeSegment(), i, i + 1) for i in range(60)]  # type: ignore[arg-type]
    with Fanout(4) as fan:
        got = [list(r) for r in fan.ordered(scan, pieces)]
    assert got == [[i, i + 1] for i in range(60)]


def test_closing_early_cancels_what_has_not_started_and_waits_for_what_has() -> None:
    running, started = [0], []
    lock = threading.Lock()

    def scan(piece: Piece) -> Iterator[int]:
        with lock:
            running[0] += 1
            started.append(piece.start)
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        yield piece.start

    pieces = [Piece(FakeSegment(), i, i + 1) for i in range(100)]  # type: ignore[arg-type]
    with Fanout(3) as fan:
        results = fan.ordered(scan, pieces)
        assert list(next(results)) == [0]
        results.close()
        assert running[0] == 0  # nothing still reads after close returns
        assert len(started) <= 1 + 2 * 3 + 3  # read ahead is bounded


def test_an_error_surfaces_at_its_piece_after_the_pieces_before_it() -> None:
    def scan(piece: Piece) -> Iterator[int]:
        if piece.start == 5:
            raise ValueError("piece 5")
        yield piece.start

    pieces = [Piece(FakeSegment(), i, i + 1) for i in range(20)]  # type: ignore[arg-type]
    seen = []
    with Fanout(4) as fan, pytest.raises(ValueError, match="piece 5"):
        for r in fan.ordered(scan, pieces):
            seen.extend(r)
    assert seen == [0, 1, 2, 3, 4]


def test_a_unit_that_cannot_be_read_fails_after_the_units_before_it() -> None:
    """Phase one reads its units in the caller's thread: a read error must not overtake
    the results already read, which a caller may stop at (a full map) before it."""

    def units() -> Iterator[Piece]:
        for i in range(10):
            if i == 6:
                raise OSError("unit 6 unreadable")
            yield Piece(FakeSegment(), i, i + 1)  # type: ignore[arg-type]

    def scan(piece: Piece) -> Iterator[int]:
        yield piece.start

    seen = []
    with Fanout(4) as fan, pytest.raises(OSError, match="unit 6"):
        for r in fan.ordered(scan, units()):
            seen.extend(r)
    assert seen == [0, 1, 2, 3, 4, 5]
    with Fanout(4) as fan:
        stopped = []
        results = fan.ordered(scan, units())
        for r in results:
            stopped.extend(r)
            if stopped[-1] == 3:
                results.close()  # the caller had what it needed: no error reaches it
                break
    assert stopped == [0, 1, 2, 3]
