"""LogCleaner: retain rules, partial passes, tombstones, grouping, states, crash safety."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.compactor.log_cleaner import (
    LogCleaner,
    SkimpyOffsetMap,
    Throttler,
    group_segments_by_size,
)
from compactlog.compactor.log_cleaner.checkpoint import CleanerCheckpoint
from compactlog.compactor.log_cleaner.manager import IllegalCleanerState
from compactlog.compactor.progress import LocalRunControl, Progress
from compactlog.errors import CompactionRunning, OffsetOutOfRange
from compactlog.storage import batch
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.types import Record


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms / 1000


class SimulatedCrash(BaseException):
    """Like a kill -9: not an Exception, so no cleanup handler runs."""


def open_all(
    root: Path, clock: Clock, buffer: int = 24 * 1024
) -> tuple[SegmentedLogManager, LogCleaner]:
    s = ServerSettings(
        topic_defaults={}, log_cleaner_dedupe_buffer_size=buffer, log_cleaner_backoff_ms=10
    )
    m = SegmentedLogManager(root, s, clock=clock, start_threads=False)
    return m, LogCleaner(m, s, clock=clock)


COMPACT = {"cleanup.policy": "compact", "segment.bytes": "200", "retention.ms": "-1"}


def publish(
    m: SegmentedLogManager, topic: str, keys: list[bytes | None], value: bytes | None = b"v"
) -> None:
    for k in keys:
        m.append(topic, [Record(k, value)])
    m.get_log(topic).roll()


def survivors(m: SegmentedLogManager, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(x.id.entry_id, x.key, x.value) for x in m.read(topic, m.log_start_offset(topic), 0)]


def test_seed_example_keeps_latest_offsets(tmp_path: Path) -> None:
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", COMPACT)
    keys = [b"K1", b"K2", b"K1", b"K1", None, b"K2", None, None, None, b"K2"]
    publish(m, "t", keys)
    result = c.clean_now("t")
    assert survivors(m, "t") == [(3, b"K1", b"v"), (9, b"K2", b"v")]
    assert (result.read, result.kept, result.removed, result.keyless_dropped) == (10, 2, 8, 4)
    assert result.error is None and result.bytes_out < result.bytes_in
    # Offset gaps: a read at a removed offset starts at the next survivor; ids never change.
    assert m.read("t", 4, 1)[0].id.entry_id == 9
    assert m.read("t", 0, 1)[0].id.entry_id == 3
    assert m.append("t", [Record(b"K3", b"v")]).offsets == [10]
    m.delete_records("t", 3)
    with pytest.raises(OffsetOutOfRange):
        m.read("t", 2, 1)
    m.close()


def test_partial_cleaning_with_one_entry_map(tmp_path: Path) -> None:
    m, c = open_all(tmp_path, Clock(), buffer=48)
    m.create_topic("t", COMPACT)
    publish(m, "t", [b"A", b"A", b"B", b"B", b"A"])
    first = c.clean_now("t")
    # The map holds one key: the pass maps A@0..1, stops at B@2, cleans below offset 2.
    assert c.cleaner_manager.checkpoint.get("t") == 2
    assert survivors(m, "t") == [(1, b"A", b"v"), (2, b"B", b"v"), (3, b"B", b"v"), (4, b"A", b"v")]
    assert first.removed == 1
    c.clean_now("t")
    assert c.cleaner_manager.checkpoint.get("t") == 4
    c.clean_now("t")
    assert survivors(m, "t") == [(3, b"B", b"v"), (4, b"A", b"v")]
    assert c.stats().max_buffer_utilization == 0.5  # one entry of two slots
    m.close()


def test_tombstone_kept_through_a_pass_then_removed_after_delete_retention(tmp_path: Path) -> None:
    clock = Clock()
    m, c = open_all(tmp_path, clock)
    m.create_topic("t", {**COMPACT, "delete.retention.ms": "1000"})
    publish(m, "t", [b"A", b"B"])
    publish(m, "t", [b"A"], value=None)
    c.clean_now("t")
    assert survivors(m, "t") == [(1, b"B", b"v"), (2, b"A", None)]
    clock.advance_ms(999)
    assert c.clean_now("t").tombstones == 0
    assert survivors(m, "t")[-1] == (2, b"A", None)
    clock.advance_ms(1)
    assert c.clean_now("t").tombstones == 1
    assert survivors(m, "t") == [(1, b"B", b"v")]
    m.close()


def test_grouping_limits(tmp_path: Path) -> None:
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", {**COMPACT, "segment.bytes": "100"})
    publish(m, "t", [b"k%d" % i for i in range(8)])  # distinct keys: nothing to remove
    segs = list(m.get_log("t").segments[:-1])
    size = max(s.size for s in segs)  # offset 0 takes no id bytes: its batch is smaller
    assert [len(g) for g in group_segments_by_size(segs, 2 * size, 10**6, 8)] == [2, 2, 2, 2]
    assert [len(g) for g in group_segments_by_size(segs, 3 * size, 10**6, 8)] == [3, 3, 2]
    assert [len(g) for g in group_segments_by_size(segs, 10**6, 0, 8)] == [1] * 8
    m.update_config("t", {**COMPACT, "segment.bytes": str(3 * size)})
    c.clean_now("t")
    log = m.get_log("t")
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 8]
    assert [x.id.entry_id for x in m.read("t", 0, 0)] == list(range(8))
    m.close()


def test_min_compaction_lag_and_active_segment_are_not_cleaned(tmp_path: Path) -> None:
    clock = Clock()
    m, c = open_all(tmp_path, clock)
    m.create_topic("t", {**COMPACT, "min.compaction.lag.ms": "1000"})
    publish(m, "t", [b"A", b"A"])
    m.append("t", [Record(b"A", b"v")])  # active segment
    c.clean_now("t")
    assert len(survivors(m, "t")) == 3  # too young
    clock.advance_ms(1001)
    c.clean_now("t")
    # Offset 1 wins inside the cleanable section; the active segment's record is untouched.
    assert [x[0] for x in survivors(m, "t")] == [1, 2]
    m.close()


def test_filthiest_first_and_max_compaction_lag(tmp_path: Path) -> None:
    clock = Clock()
    m, c = open_all(tmp_path, clock)
    m.create_topic("a", COMPACT)
    m.create_topic("b", COMPACT)
    m.create_topic(
        "lazy", {**COMPACT, "min.cleanable.dirty.ratio": "1.0", "max.compaction.lag.ms": "5000"}
    )
    publish(m, "a", [b"x"] * 3)
    publish(m, "b", [b"x"] * 6)
    publish(m, "lazy", [b"x"] * 2)
    cm = c.cleaner_manager
    c.clean_now("a")
    publish(m, "a", [b"y", b"y"])  # a: dirty ratio 2/3, below b's 1.0
    job = cm.grab_filthiest()
    assert job is not None and job.name == "b"
    with pytest.raises(CompactionRunning):
        c.clean_now("b")
    cm.done_cleaning("b", None)
    c.clean_now("b")
    assert cm.grab_filthiest() is not None  # a (ratio > 0.5)
    cm.done_cleaning("a", None)
    c.clean_now("a")
    assert cm.grab_filthiest() is None  # lazy: ratio 1.0 is never exceeded
    clock.advance_ms(5001)
    job = cm.grab_filthiest()
    assert job is not None and job.name == "lazy" and job.needs_compaction_now
    cm.done_cleaning("lazy", None)
    m.close()


def test_cleaning_states_and_transitions(tmp_path: Path) -> None:
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", COMPACT)
    cm = c.cleaner_manager
    cm.abort_and_pause("t")
    cm.abort_and_pause("t")
    assert cm.state("t") == "Paused(2)"
    with pytest.raises(CompactionRunning):
        c.clean_now("t")
    cm.resume("t")
    cm.resume("t")
    assert cm.state("t") is None
    with pytest.raises(IllegalCleanerState):
        cm.resume("t")
    with pytest.raises(IllegalCleanerState):
        cm.done_cleaning("t", 0)
    cm.begin_forced("t")
    assert cm.state("t") == "InProgress"
    cm.done_cleaning("t", 0)
    m.close()


def test_uncleanable_topic_does_not_stop_the_cleaner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", COMPACT)
    publish(m, "t", [b"A", b"A"])

    def boom(*_a: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr("compactlog.compactor.log_cleaner.cleaner.Cleaner.clean_segments", boom)
    result = c.clean_now("t")
    assert result.error is not None and "disk on fire" in result.error
    assert c.stats().uncleanable_count == 1 and c.cleaner_manager.state("t") is None
    assert not [n for n in os.listdir(tmp_path / "t") if n.endswith(".cleaned")]
    m.close()


def test_cleaner_threads_clean_in_background_and_delete_topic_stops_them(tmp_path: Path) -> None:
    clock = Clock()
    m, c = open_all(tmp_path, clock)
    m.create_topic("t", COMPACT)
    publish(m, "t", [b"A"] * 6)
    c.start()
    try:
        for _ in range(500):
            if c.last_result("t") is not None:
                break
            time.sleep(0.01)
        assert survivors(m, "t") == [(5, b"A", b"v")]
        m.delete_topic("t")
        assert "t" not in c.cleaner_manager.checkpoint.all()
    finally:
        c.stop()
        m.close()


def test_compact_delete_applies_both(tmp_path: Path) -> None:
    clock = Clock()
    m, c = open_all(tmp_path, clock)
    m.create_topic(
        "t",
        {**COMPACT, "cleanup.policy": "compact,delete", "retention.ms": "1000"}
        | {"segment.bytes": "300"},
    )
    publish(m, "t", [b"A", b"B", b"A"])  # one segment of three one-record batches
    clock.advance_ms(2000)
    publish(m, "t", [b"B", b"C"])
    c.clean_now("t")
    assert [k for _, k, _ in survivors(m, "t")] == [b"A", b"B", b"C"]
    m.enforce_retention("t")
    assert [k for _, k, _ in survivors(m, "t")] == [b"B", b"C"]
    m.close()


# ---- batches ---------------------------------------------------------------------------
def records_by_offset(m: SegmentedLogManager, topic: str) -> dict[int, bytes]:
    """Every stored message record of the topic, tag and length included, by offset."""
    payload = b"".join(m.read_payload(topic, m.log_start_offset(topic), 2**62, 0, 2**40)[0])
    return {entry: payload[s:e] for _l, entry, _f, _k, s, e in batch.walk(payload, topic)}


def headers_of(m: SegmentedLogManager, topic: str) -> list[batch.BatchHeader]:
    out = []
    for seg in m.get_log(topic).segments:
        out += [h for _b, _p, h, _at in seg.batches(0, seg.size)]
    return out


def test_cleaning_keeps_offsets_and_copies_survivors_byte_for_byte(tmp_path: Path) -> None:
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", {**COMPACT, "segment.bytes": "100000"})
    for i in range(6):
        m.append(
            "t",
            [Record(b"k%d" % (j % 4), b"v%d-%d" % (i, j), {"n": str(j)}, j) for j in range(5)]
            + [Record(None, b"keyless")],
        )
    m.get_log("t").roll()
    before = records_by_offset(m, "t")
    assert c.clean_now("t").error is None
    after = records_by_offset(m, "t")
    # The latest offset of each key survives, its record bytes untouched.
    assert sorted(after) == [31, 32, 33, 34]
    assert all(after[o] == before[o] for o in after)
    heads = headers_of(m, "t")
    assert [(h.first_id.entry_id, h.last_id.entry_id, h.count) for h in heads] == [(31, 34, 4)]
    assert heads[0].attributes == 0  # a gapless run of one publish stays a plain batch
    m.close()


def test_survivors_share_batches_and_tombstones_carry_the_batch_horizon(tmp_path: Path) -> None:
    clock = Clock()
    m, c = open_all(tmp_path, clock)
    m.create_topic("t", {**COMPACT, "segment.bytes": "100000", "delete.retention.ms": "500"})
    publish(m, "t", [b"a", b"b", b"a", b"c", b"d"])  # five one-record batches
    m.append("t", [Record(b"b", None), Record(b"e", b"e")])
    m.get_log("t").roll()
    assert c.clean_now("t").error is None
    now = int(clock.now * 1000)
    heads = headers_of(m, "t")
    # Survivors of four publishes share one batch, which takes b's tombstone horizon.
    assert [(h.first_id.entry_id, h.last_id.entry_id, h.count) for h in heads] == [(2, 6, 5)]
    assert heads[0].compacted and heads[0].delete_horizon_ms == now + 500
    m.append("t", [Record(b"f", None)])
    m.get_log("t").roll()
    clock.advance_ms(200)
    c.clean_now("t")
    # b's horizon is not pushed back; f's tombstone, kept for the first time, gets its own.
    assert [(h.first_id.entry_id, h.count, h.delete_horizon_ms) for h in headers_of(m, "t")] == [
        (2, 5, now + 500),
        (7, 1, now + 700),
    ]
    clock.advance_ms(300)
    assert c.clean_now("t").tombstones == 1
    assert [x[0] for x in survivors(m, "t")] == [2, 3, 4, 6, 7]
    assert [(h.first_id.entry_id, h.count, h.delete_horizon_ms) for h in headers_of(m, "t")] == [
        (2, 5, now + 700)
    ]
    m.close()


def test_a_corrupt_batch_stops_the_pass_and_nothing_is_swapped(tmp_path: Path) -> None:
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", COMPACT)
    publish(m, "t", [b"A", b"A", b"B"])
    path = m.get_log("t").segments[0].path()
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))
    result = c.clean_now("t")
    assert result.error is not None and "CRC-32C mismatch" in result.error
    assert path.name in result.error and c.stats().uncleanable_count == 1
    assert path.read_bytes() == bytes(data)
    assert not [n for n in os.listdir(tmp_path / "t") if n.endswith((".cleaned", ".swap"))]
    m.close()


# ---- crash safety of the swap ---------------------------------------------------------
ORIGINAL = [(i, k, b"v") for i, k in enumerate([b"A", b"B", b"A", b"B", b"A", b"C"])]
CLEANED = [(3, b"B", b"v"), (4, b"A", b"v"), (5, b"C", b"v")]


def _crash_during_pass(tmp_path: Path, step: str, truncate_cleaned: bool = False) -> None:
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", {**COMPACT, "segment.bytes": "100000"})
    for k in [b"A", b"B", b"A"]:
        m.append("t", [Record(k, b"v")])
    m.get_log("t").roll()
    publish(m, "t", [b"B", b"A", b"C"])
    log = m.get_log("t")

    def hook(name: str) -> None:
        if name == step:
            if truncate_cleaned:
                path = tmp_path / "t" / f"{0:020d}.log.cleaned"
                os.truncate(path, path.stat().st_size - 5)
            raise SimulatedCrash(name)

    log.swap_hook = hook
    with pytest.raises(SimulatedCrash):
        c.clean_now("t")
    for one in m.logs().values():
        one.mark_deleted()  # the process dies: no flush, no recovery-point update


@pytest.mark.parametrize(
    ("step", "truncate", "expected"),
    [
        ("cleaned", True, ORIGINAL),  # 1: torn .cleaned file
        ("cleaned", False, ORIGINAL),  # 2: .cleaned complete, not renamed
        ("swapped", False, CLEANED),  # 3: renamed to .swap, old segments untouched
        ("deleted-0", False, CLEANED),  # 4: some old segments renamed to .deleted
        ("deleted-1", False, CLEANED),  # 5: all old segments .deleted, .swap not renamed
        ("renamed", False, CLEANED),  # 6: .swap renamed to its final name
    ],
)
def test_six_crash_points_of_the_swap(
    tmp_path: Path, step: str, truncate: bool, expected: list[tuple[int, bytes, bytes]]
) -> None:
    _crash_during_pass(tmp_path, step, truncate)
    m, _c = open_all(tmp_path, Clock())
    assert survivors(m, "t") == expected
    names = os.listdir(tmp_path / "t")
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert m.append("t", [Record(b"Z", b"v")]).offsets == [6]
    m.close()


def test_incomplete_multi_segment_swap_gives_back_the_original(tmp_path: Path) -> None:
    """A crash midway through renaming several .cleaned to .swap (descending order)."""
    m, _c = open_all(tmp_path, Clock())
    m.create_topic("t", COMPACT)
    publish(m, "t", [b"A", b"B", b"A", b"B", b"A", b"C"])
    log = m.get_log("t")
    bases = [s.base_offset for s in log.segments[:-1]]
    m.close()
    d = tmp_path / "t"
    low, high = bases[0], bases[-1]
    for ext in (".log", ".index", ".timeindex"):
        (d / f"{low:020d}{ext}.cleaned").write_bytes((d / f"{low:020d}{ext}").read_bytes())
        (d / f"{high:020d}{ext}.swap").write_bytes(b"garbage" if ext == ".log" else b"")
    m, _c = open_all(tmp_path, Clock())
    assert survivors(m, "t") == ORIGINAL
    assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]
    m.close()


# ---- parts ----------------------------------------------------------------------------
def test_offset_map_fixed_budget() -> None:
    m = SkimpyOffsetMap(48, 0.9)
    assert (m.slots, m.max_entries, m.memory_bytes) == (2, 1, 48)
    assert m.put(b"a", 1) and m.put(b"a", 7) and not m.put(b"b", 8)
    assert (m.get(b"a"), m.get(b"b"), m.size) == (7, -1, 1)
    big = SkimpyOffsetMap(24 * 1000, 0.75)
    for i in range(big.max_entries):
        assert big.put(b"key%d" % i, i)
    assert not big.put(b"one more", 10**6)
    assert all(big.get(b"key%d" % i) == i for i in range(big.max_entries))
    big.clear()
    assert big.get(b"key1") == -1 and big.size == 0


def test_throttler_sleeps_to_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []
    t = Throttler(
        1000.0, clock=lambda: now[0], sleep=lambda s: slept.append(s), check_interval_s=0.1
    )
    t.maybe_throttle(500)  # 500 B at t=0 → must take 0.5 s
    assert slept == [0.5]


def test_checkpoint_roundtrip(tmp_path: Path) -> None:
    cp = CleanerCheckpoint(tmp_path / "cp")
    cp.update("a", 5)
    cp.update("b.c", 7)
    cp.remove("a")
    assert CleanerCheckpoint(tmp_path / "cp").all() == {"b.c": 7}
    assert (tmp_path / "cp").read_text().startswith("0\n1\nb.c 7\n#crc32c:")


def test_a_damaged_checkpoint_is_set_aside_and_cleaning_starts_over(tmp_path: Path) -> None:
    cp = CleanerCheckpoint(tmp_path / "cp")
    cp.update("b.c", 7)
    data = bytearray((tmp_path / "cp").read_bytes())
    data[6] ^= 0x01  # "7" -> "6": a plausible offset, caught by the checksum
    (tmp_path / "cp").write_bytes(bytes(data))
    assert CleanerCheckpoint(tmp_path / "cp").all() == {}
    assert [p.name.split(".bad-")[0] for p in tmp_path.glob("cp.bad-*")] == ["cp"]


# ---- model-based ----------------------------------------------------------------------
EVENTS = st.lists(
    st.tuples(st.sampled_from([None, b"a", b"b", b"c", b"d"]), st.sampled_from([b"x", b"", None])),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=EVENTS, buffer=st.sampled_from([48, 24 * 1024]), seg=st.sampled_from([150, 400, 5000])
)
def test_model_survivors_follow_the_rules(
    tmp_path_factory: pytest.TempPathFactory,
    events: list[tuple[bytes | None, bytes | None]],
    buffer: int,
    seg: int,
) -> None:
    root = tmp_path_factory.mktemp("model")
    clock = Clock()
    m, c = open_all(root, clock, buffer=buffer)
    m.create_topic("t", {**COMPACT, "segment.bytes": str(seg), "delete.retention.ms": "100"})
    for k, v in events:
        m.append("t", [Record(k, v)])
    m.get_log("t").roll()
    for _ in range(len(events) + 1):  # enough passes for any map size
        assert c.clean_now("t").error is None
    latest = {k: i for i, (k, _v) in enumerate(events) if k is not None}
    expected = [(i, k, v) for i, (k, v) in enumerate(events) if k is not None and latest[k] == i]
    assert survivors(m, "t") == expected  # tombstones still within delete.retention.ms
    clock.advance_ms(100)
    c.clean_now("t")
    assert survivors(m, "t") == [e for e in expected if e[2] is not None]
    assert m.log_end_offset("t") == len(events)
    m.close()


class Recorder(LocalRunControl):
    def __init__(self) -> None:
        super().__init__()
        self.reports: list[Progress] = []

    def report(self, progress: Progress) -> None:
        super().report(progress)
        self.reports.append(progress)


def test_progress_counts_every_byte_the_pass_read_and_wrote(tmp_path: Path) -> None:
    """A first pass maps every closed segment and rewrites them all: it reads the log
    twice, and the last report says so to the byte (no remainder under the 1 MiB pace)."""
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", COMPACT)
    publish(m, "t", [b"k%d" % (i % 7) for i in range(60)] + [None])
    control = Recorder()
    result = c.clean_now("t", control)
    last = control.reports[-1]
    assert result.error is None and result.bytes_in > 0
    assert last.bytes_read == 2 * result.bytes_in and last.bytes_written == result.bytes_out
    assert last.done == last.total and {p.phase for p in control.reports} == {"cleaning"}
