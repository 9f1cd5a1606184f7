"""Progress, cancellation and preview of TwoPhaseCompactor runs, over both storages."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.compactor.log_cleaner.offset_map import BYTES_PER_ENTRY
from compactlog.compactor.progress import (
    COMMIT,
    PHASE_ONE,
    PHASE_TWO,
    LocalRunControl,
    Progress,
    RunCancelled,
)
from compactlog.compactor.two_phase import TwoPhaseCompactor
from compactlog.compactor.two_phase.memory import InMemoryCompactionStorage
from compactlog.compactor.two_phase.phase_one import LOAD_FACTOR, find_winners
from compactlog.storage.types import Record

from .conftest import MemoryHarness

MB = 1 << 20


class Recorder(LocalRunControl):
    """Keeps every report; cancels itself when the run reports ``cancel_in``."""

    def __init__(self, cancel_in: str = "") -> None:
        super().__init__()
        self.cancel_in = cancel_in
        self.reports: list[Progress] = []

    def report(self, progress: Progress) -> None:
        super().report(progress)
        self.reports.append(progress)
        if progress.phase == self.cancel_in:
            self.cancel()


def seed(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish("t", [Record(b"a", b"1"), Record(b"b", b"1"), Record(b"a", b"2")])
    TwoPhaseCompactor(harness.storage, MB).compact("t")
    harness.publish("t", [Record(b"k%d" % (i % 9), b"%d" % i) for i in range(40)])


def test_progress_goes_through_the_phases_in_order(harness: Any) -> None:
    seed(harness)
    control = Recorder()
    result = TwoPhaseCompactor(harness.storage, MB).compact("t", control)
    phases = [p.phase for p in control.reports]
    assert phases == sorted(phases, key=[PHASE_ONE, PHASE_TWO, COMMIT].index)
    assert set(phases) == {PHASE_ONE, PHASE_TWO, COMMIT}
    one = [p for p in control.reports if p.phase == PHASE_ONE][-1]
    two = [p for p in control.reports if p.phase == PHASE_TWO][-1]
    assert one.done == one.total == result.run.read == 42
    assert two.done == two.total and two.bytes_written == result.run.bytes_out
    # bytes read add up over the run: phase one's input, then what phase two read
    assert one.bytes_read == result.run.bytes_in and two.bytes_read > one.bytes_read
    assert control.reports[-1] == Progress(COMMIT, 1, 1, two.bytes_read, two.bytes_written)


@pytest.mark.parametrize("phase", [PHASE_ONE, PHASE_TWO, COMMIT])
def test_cancel_in_each_phase_keeps_the_previous_view(harness: Any, phase: str) -> None:
    seed(harness)
    before, ledgers = harness.view("t"), harness.ledger_ids()
    with pytest.raises(RunCancelled):
        TwoPhaseCompactor(harness.storage, MB).compact("t", Recorder(cancel_in=phase))
    assert harness.view("t") == before and harness.ledger_ids() == ledgers  # no orphan
    if hasattr(harness, "restart"):
        harness.restart()
        assert harness.view("t") == before and harness.ledger_ids() == ledgers
    assert TwoPhaseCompactor(harness.storage, MB).compact("t").committed  # runs again


def test_a_cancel_after_the_commit_write_is_too_late(harness: Any) -> None:
    seed(harness)
    control = Recorder()

    def cancel_now(point: str) -> None:
        if point == "after_commit":
            control.cancel()

    result = TwoPhaseCompactor(harness.storage, MB, fault=cancel_now).compact("t", control)
    assert result.committed and control.cancelled


RECORDS = st.lists(
    st.tuples(
        st.sampled_from([b"a", b"b", b"c", b"d", b"e", None]),
        st.sampled_from([b"1", b"22", b"", None]),
    ),
    min_size=0,
    max_size=30,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(RECORDS, min_size=1, max_size=4),
    retain=st.booleans(),
    slots=st.sampled_from([5, 11, 1000]),
)
def test_preview_figures_equal_the_following_runs(
    batches: list[list[tuple[bytes | None, bytes | None]]], retain: bool, slots: int
) -> None:
    harness = MemoryHarness()
    harness.create_topic("t", retain_null_key=retain)
    compactor = TwoPhaseCompactor(harness.storage, BYTES_PER_ENTRY * slots)
    for batch in batches:
        harness.publish("t", [Record(k, v) for k, v in batch])
        before = harness.view("t")
        inp = harness.storage.begin("t")
        try:
            preview = compactor.preview(inp)
        except Exception as exc:  # a map too small for the compacted ledger: both fail
            with pytest.raises(type(exc)):
                compactor.compact("t")
            continue
        assert harness.view("t") == before  # the preview wrote nothing
        run = compactor.compact("t").run
        figures = ("read", "kept", "removed", "tombstones", "keyless_dropped")
        figures += ("bytes_in", "bytes_out")
        assert [getattr(preview, f) for f in figures] == [getattr(run, f) for f in figures]


def test_phase_one_costs_24_bytes_a_key() -> None:
    """The map's own accounting and tracemalloc agree: 24 B an entry, the table at most
    1/0.9 of the entries after growing, plus the old table while it rehashes."""
    mem = InMemoryCompactionStorage()
    mem.create_topic("t", ledger_max_entries=10_000)
    keys = 20_000
    mem.publish("t", [Record(b"key-%07d" % (i * 7919 % keys), b"v") for i in range(2 * keys)])
    inp = mem.begin("t")
    tracemalloc.start()
    winners = find_winners(mem, inp, 1 << 30)
    _now, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert winners.distinct_keys == keys
    slots = winners.map_bytes // BYTES_PER_ENTRY  # 16 B digest + 8 B position an entry
    assert keys <= slots * LOAD_FACTOR < 2 * keys + 2  # at most half empty after a doubling
    bits = (2 * keys + 7) // 8  # phase two's bitmap, made from the map, which it replaces
    assert winners.peak_bytes <= 3 * winners.map_bytes // 2 + bits + 1024
    assert peak < winners.peak_bytes + 64 * 1024  # nothing else grows with the keys


def test_phase_two_finds_the_same_winners_by_bitmap_or_by_lookup(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish("t", [Record(b"k%d" % (i % 13), b"%d" % (i % 5)) for i in range(300)])
    harness.publish("t", [Record(b"k%d" % i, None) for i in range(0, 13, 3)])
    inp = harness.storage.begin("t")
    roomy = find_winners(harness.storage, inp, 1 << 20)
    tight = find_winners(harness.storage, inp, roomy.map_bytes)  # no room for the bitmap
    assert roomy.bits is not None and roomy.offset_map is None
    assert tight.bits is None and tight.offset_map is not None
    for index, seg in enumerate(inp.segments):
        assert roomy.selection(harness.storage, index, seg) == tight.selection(
            harness.storage, index, seg
        )
