"""TwoPhaseCompactor behaviour over both storages (twin and RocksDB adapter)."""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.compactor.two_phase import FAULT_POINTS, PhaseOneMemoryExceeded, TwoPhaseCompactor
from compactlog.storage.types import MessageId, Record

MB = 1 << 20


def compact(harness: Any, topic: str = "t") -> Any:
    return TwoPhaseCompactor(harness.storage, MB).compact(topic)


def kv(view: Any) -> list[tuple[bytes | None, bytes | None]]:
    return [(k, v) for _id, k, v in view]


def test_latest_value_per_key_in_id_order_of_winners(harness: Any) -> None:
    harness.create_topic("t")
    ids = harness.publish(
        "t", [Record(b"c", b"1"), Record(b"a", b"2"), Record(b"b", b"3"), Record(b"a", b"4")]
    )
    result = compact(harness)
    assert harness.view("t") == [(ids[0], b"c", b"1"), (ids[2], b"b", b"3"), (ids[3], b"a", b"4")]
    run = result.run
    assert (run.read, run.kept, run.removed, run.tombstones, run.keyless_dropped) == (4, 3, 1, 0, 0)
    assert result.horizon == ids[-1] and result.committed and run.engine == "local"
    assert run.bytes_in > 0 and run.bytes_out > run.bytes_in - 40  # ids added, one dropped


def test_winner_bytes_are_the_original_message_with_its_id(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish("t", [Record(b"k", b"v", {"p": "q"}, event_time_ms=7)])
    compact(harness)
    ((_msg_id, key, value),) = harness.view("t")
    assert (key, value) == (b"k", b"v")


def test_incremental_run_reads_previous_compacted_ledger_and_raw_tail(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish("t", [Record(b"a", b"1"), Record(b"b", b"1"), Record(b"c", b"1")])
    first = compact(harness)
    tail = harness.publish("t", [Record(b"b", b"2"), Record(b"d", b"1")])
    second = compact(harness)
    assert kv(harness.view("t")) == [(b"a", b"1"), (b"c", b"1"), (b"b", b"2"), (b"d", b"1")]
    assert second.previous_ledger == first.ledger_id and second.horizon == tail[-1]
    assert second.run.read == 5 and second.run.kept == 4
    assert first.ledger_id not in harness.ledger_ids()  # previous compacted ledger deleted


def test_nothing_to_do_keeps_the_view(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish("t", [Record(b"a", b"1")])
    first = compact(harness)
    again = compact(harness)
    assert not again.committed and again.ledger_id == first.ledger_id and again.run.read == 0


def test_empty_topic(harness: Any) -> None:
    harness.create_topic("t")
    result = compact(harness)
    assert not result.committed and result.ledger_id is None and harness.view("t") == []


@pytest.mark.parametrize("tombstone", [None, b""])
def test_tombstones(harness: Any, tombstone: bytes | None) -> None:
    harness.create_topic("t")
    harness.publish(
        "t",
        [
            Record(b"a", b"1"),
            Record(b"b", b"1"),
            Record(b"a", tombstone),
            Record(b"c", b"1"),
            Record(b"c", tombstone),
            Record(b"c", b"2"),
            Record(b"b", tombstone),
        ],
    )  # deleted; deleted then re-added; trailing
    run = compact(harness).run
    assert kv(harness.view("t")) == [(b"c", b"2")]
    assert (run.read, run.kept, run.tombstones) == (7, 1, 3)


def test_everything_deleted_gives_an_empty_view(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish("t", [Record(b"a", b"1"), Record(b"a", None)])
    result = compact(harness)
    assert result.committed and harness.view("t") == []
    harness.publish("t", [Record(b"a", b"2")])
    compact(harness)
    assert kv(harness.view("t")) == [(b"a", b"2")]


@pytest.mark.parametrize("retain", [False, True])
def test_keyless_messages(harness: Any, retain: bool) -> None:
    harness.create_topic("t", retain_null_key=retain)
    ids = harness.publish(
        "t", [Record(None, b"x"), Record(b"a", b"1"), Record(None, b"y"), Record(b"a", b"2")]
    )
    run = compact(harness).run
    if retain:
        want = [(ids[0], None, b"x"), (ids[2], None, b"y"), (ids[3], b"a", b"2")]
        assert harness.view("t") == want
        assert run.keyless_dropped == 0 and run.kept == 3
    else:
        assert harness.view("t") == [(ids[3], b"a", b"2")]
        assert run.keyless_dropped == 2 and run.removed == 3


def test_full_map_compacts_a_prefix_and_fails_only_without_progress(harness: Any) -> None:
    harness.create_topic("t")
    ids = harness.publish("t", [Record(b"key-%06d" % i, b"v") for i in range(5000)])
    first = TwoPhaseCompactor(harness.storage, 4096).compact("t")
    covered = first.run.read  # entries before the first key that did not fit
    assert first.committed and 0 < covered < 5000
    assert first.horizon == ids[covered - 1] and first.run.kept == covered
    assert first.run.distinct_keys == covered
    assert first.run.phase_one_peak_bytes <= 4096
    assert kv(harness.view("t")) == kv([(i, b"key-%06d" % n, b"v") for n, i in enumerate(ids)])
    before = harness.ledger_ids()
    # the compacted ledger alone fills the map now: no progress is possible
    with pytest.raises(PhaseOneMemoryExceeded, match=r"phase\.one\.memory\.bytes=4096"):
        TwoPhaseCompactor(harness.storage, 4096).compact("t")
    assert harness.ledger_ids() == before and len(harness.view("t")) == 5000


def test_full_map_partial_runs_converge_to_latest_per_key(harness: Any) -> None:
    harness.create_topic("t")
    records = []
    for era in range(6):  # keys come and go: few are live at any time
        records += [Record(b"k%d-%d" % (era, i % 8), b"%d" % i) for i in range(40)]
        records += [Record(b"k%d-%d" % (era, i), None) for i in range(8)]
    records.append(Record(b"last", b"x"))
    ids = harness.publish("t", records)
    runs = 0
    while True:
        result = TwoPhaseCompactor(harness.storage, 24 * 20).compact("t")
        if not result.committed:
            break
        runs += 1
        assert runs < 50
    assert runs > 1 and result.horizon == ids[-1]
    assert kv(harness.view("t")) == [(b"last", b"x")]


def test_phase_one_reports_bytes_per_distinct_key(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish("t", [Record(b"key-%06d" % (i % 5000), b"v") for i in range(20000)])
    run = compact(harness).run
    assert run.distinct_keys == 5000
    # 24 B an entry; the table doubles at 90 % load, and both exist while it rehashes
    assert 24 / 0.9 < run.phase_one_peak_bytes / run.distinct_keys < 3 * 24 / 0.9


class Crash(BaseException):
    """A simulated process death: not an Exception, so no cleanup runs."""


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_crash_at_each_step_leaves_old_or_new_view(harness: Any, point: str) -> None:
    harness.create_topic("t")
    harness.publish("t", [Record(b"a", b"1"), Record(b"b", b"1")])
    compact(harness)
    harness.publish("t", [Record(b"a", b"2")])
    old = harness.view("t")

    def crash(at: str) -> None:
        if at == point:
            raise Crash(at)

    with pytest.raises(Crash):
        TwoPhaseCompactor(harness.storage, MB, fault=crash).compact("t")
    committed = FAULT_POINTS.index(point) >= FAULT_POINTS.index("after_commit")
    new = [(MessageId(old[0][0].ledger_id, 1), b"b", b"1"), old[2]]
    assert harness.view("t") == (new if committed else old)
    if hasattr(harness, "restart"):
        harness.restart()
        assert harness.view("t") == (new if committed else old)
        topic = harness.store.topic("t")
        expected = {led.ledger_id for led in topic.ledgers} | {topic.compacted_ledger_id()}
        assert harness.ledger_ids() == expected  # orphans collected at start-up


def test_failure_discards_the_new_ledger(harness: Any) -> None:
    harness.create_topic("t")
    harness.publish("t", [Record(b"a", b"1")])
    before = harness.ledger_ids()

    def boom(at: str) -> None:
        if at == "after_seal":
            raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        TwoPhaseCompactor(harness.storage, MB, fault=boom).compact("t")
    assert harness.ledger_ids() == before
