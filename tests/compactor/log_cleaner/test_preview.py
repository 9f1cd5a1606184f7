"""PreviewCompaction on SEGMENTED topics: a dry LogCleaner pass. Its figures are those of
the pass that follows, and it changes nothing: no file, no checkpoint, no state, no
figure of the cleaner."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.compactor.log_cleaner import CleanerPassResult, LogCleaner
from compactlog.compactor.log_cleaner.passes import InProcessPasses
from compactlog.compactor.log_cleaner.plan import CleanPlan, PassStats
from compactlog.compactor.log_cleaner.worker_pass import WorkerPasses
from compactlog.compactor.progress import LocalRunControl, RunCancelled
from compactlog.compactor.workers import WorkerPool
from compactlog.errors import CompactionRunning, NotCompacted, WrongTopicKind
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import CleaningAborted, Log, SegmentedLogManager
from compactlog.storage.types import Record

FIGURES = ("read", "kept", "removed", "tombstones", "keyless_dropped", "bytes_in", "bytes_out")
NOW = 1_700_000_000.0
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "300", "retention.ms": "-1"}

Op = tuple[bytes | None, bytes | None]  # (key, value): None key keyless, None value tombstone


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def settings_of(buffer: int = 24 * 1024) -> ServerSettings:
    return ServerSettings(topic_defaults={}, log_cleaner_dedupe_buffer_size=buffer)


def opened(root: Path, clock: Clock, s: ServerSettings) -> SegmentedLogManager:
    return SegmentedLogManager(root, s, clock=clock, start_threads=False)


def append(m: SegmentedLogManager, ops: list[Op], per_batch: int = 3) -> None:
    for i in range(0, len(ops), per_batch):
        m.append("t", [Record(k, v) for k, v in ops[i : i + per_batch]])
    m.get_log("t").roll()


def census(root: Path) -> dict[str, str]:
    """Every file under ``root`` (segments, indexes, the cleaner's checkpoint) by content."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def figures(result: CleanerPassResult) -> dict[str, int]:
    return {name: getattr(result, name) for name in FIGURES}


def check_preview_then_pass(root: Path, m: SegmentedLogManager, c: LogCleaner) -> None:
    before = census(root)
    passes, last = c.stats().passes, c.last_result("t")
    preview = c.preview("t")
    assert census(root) == before  # nothing written, renamed or checkpointed
    assert c.stats().passes == passes and c.last_result("t") is last
    assert c.cleaner_manager.state("t") is None
    result = c.clean_now("t")
    assert result.error is None
    assert figures(preview) == figures(result)


def test_preview_has_the_figures_of_the_following_pass_and_changes_nothing(
    tmp_path: Path,
) -> None:
    clock = Clock()
    m = opened(tmp_path, clock, settings_of())
    c = LogCleaner(m, settings_of(), clock=clock)
    m.create_topic("t", COMPACT)
    ops: list[Op] = [(b"k%d" % (i % 5), b"v%03d" % i) for i in range(40)]
    ops += [(None, b"keyless"), (b"k1", None), (b"k2", b""), (b"k9", None)]
    append(m, ops)
    check_preview_then_pass(tmp_path, m, c)
    assert c.stats().passes == 1
    latest = {x.key: x.value for x in m.read("t", 0, 0)}
    assert latest[b"k1"] is None and latest[b"k2"] == b"" and None not in latest
    # a second round: the clean section and new dirty records, tombstones kept for readers
    append(m, [(b"k%d" % i, b"w") for i in range(3)] + [(b"k3", None)])
    check_preview_then_pass(tmp_path, m, c)
    nothing = c.preview("t")  # only the active segment is left dirty: nothing to map
    assert (nothing.read, nothing.error) == (nothing.kept + nothing.removed, None)
    m.close()


workloads = st.lists(
    st.tuples(
        st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"])),
        st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=40)),
    ),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=st.lists(workloads, min_size=1, max_size=3), buffer=st.sampled_from([96, 24 * 1024]))
def test_preview_equals_the_pass_over_random_workloads(
    tmp_path_factory: pytest.TempPathFactory, rounds: list[list[Op]], buffer: int
) -> None:
    """Any mix of keys, keyless records, tombstones and empty values, over several rounds;
    a small offset map (4 keys) makes partial passes, which the preview must end alike."""
    root = tmp_path_factory.mktemp("preview")
    clock = Clock()
    m = opened(root, clock, settings_of(buffer))
    c = LogCleaner(m, settings_of(buffer), clock=clock)
    m.create_topic("t", COMPACT)
    for ops in rounds:
        append(m, ops)
        check_preview_then_pass(root, m, c)
    m.close()


def test_preview_of_a_delete_only_topic_says_why(tmp_path: Path) -> None:
    clock = Clock()
    m = opened(tmp_path, clock, settings_of())
    c = LogCleaner(m, settings_of(), clock=clock)
    m.create_topic("t", {"cleanup.policy": "delete"})
    with pytest.raises(NotCompacted) as info:
        c.preview("t")
    assert isinstance(info.value, WrongTopicKind)
    assert info.value.metadata == {"topic": "t", "cleanup_policy": "delete"}
    m.close()


def test_preview_and_a_pass_exclude_each_other(tmp_path: Path) -> None:
    clock = Clock()
    m = opened(tmp_path, clock, settings_of())
    c = LogCleaner(m, settings_of(), clock=clock)
    m.create_topic("t", COMPACT)
    append(m, [(b"a", b"1"), (b"a", b"2")])
    c.cleaner_manager.begin_forced("t")  # a pass is in progress
    with pytest.raises(CompactionRunning):
        c.preview("t")
    c.cleaner_manager.done_cleaning("t", None)
    assert c.preview("t").kept == 1 and c.cleaner_manager.state("t") is None
    m.close()


def test_a_dry_pass_in_a_worker_writes_nothing_and_counts_what_the_pass_writes(
    tmp_path: Path, pool: WorkerPool
) -> None:
    clock = Clock()
    s = settings_of()
    m = opened(tmp_path, clock, s)
    c = LogCleaner(m, s, clock=clock, passes=WorkerPasses(pool, s))
    m.create_topic("t", COMPACT)
    append(m, [(b"k%d" % (i % 7), b"x" * i) for i in range(50)] + [(None, b"n"), (b"k0", None)])
    check_preview_then_pass(tmp_path, m, c)
    assert not list(tmp_path.rglob("*.cleaned"))
    m.close()


class Flaky:
    """A pass runner whose first ``aborts`` runs find the log changed under them."""

    def __init__(self, inner: InProcessPasses, aborts: int) -> None:
        self.inner, self.aborts, self.runs = inner, aborts, 0

    def run(self, plan: CleanPlan, log: Log, is_aborted: Any, control: Any) -> PassStats:
        self.runs += 1
        if self.runs <= self.aborts:
            raise CleaningAborted("retention took a segment")
        return self.inner.run(plan, log, is_aborted, control)


def flaky_cleaner(root: Path, aborts: int) -> tuple[SegmentedLogManager, LogCleaner, Flaky]:
    clock, s = Clock(), settings_of()
    m = opened(root, clock, s)
    runner = Flaky(InProcessPasses(s, 1), aborts)
    m.create_topic("t", COMPACT)
    append(m, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")])
    return m, LogCleaner(m, s, clock=clock, passes=runner), runner


def test_a_preview_that_found_the_log_changed_reads_it_again(tmp_path: Path) -> None:
    m, c, runner = flaky_cleaner(tmp_path / "twice", aborts=2)
    assert c.preview("t").kept == 2 and runner.runs == 3
    assert c.cleaner_manager.state("t") is None
    m.close()
    m, c, runner = flaky_cleaner(tmp_path / "always", aborts=99)
    with pytest.raises(CompactionRunning, match="changed under 3 previews"):
        c.preview("t")
    assert runner.runs == 3 and c.cleaner_manager.state("t") is None
    m.close()


def test_a_cancelled_preview_is_not_tried_again(tmp_path: Path) -> None:
    m, c, runner = flaky_cleaner(tmp_path, aborts=1)
    control = LocalRunControl()
    control.cancel()
    with pytest.raises(RunCancelled):
        c.preview("t", control)
    assert runner.runs == 1 and c.cleaner_manager.state("t") is None
    m.close()
