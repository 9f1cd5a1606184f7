"""VerifyCompaction's recomputation and digest over a real RocksDB ledger store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from compactlog.compactor.two_phase import TwoPhaseCompactor
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.ledger_snapshot import compacted_view, plan
from compactlog.compactor.two_phase.verify import Verification, canonical, verify_view
from compactlog.storage.types import Record
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import RocksHarness

MB = 1 << 20


def verify(rocks: RocksHarness) -> Verification:
    return verify_view(LedgerStoreCompactionStorage(rocks.store), compacted_view(rocks.store, "t"))


def workload(rocks: RocksHarness, retain: bool = False) -> None:
    rocks.create_topic("t", retain_null_key=retain)
    rocks.publish(
        "t",
        [
            Record(b"a", b"1", {"z": "1", "a": "2"}),
            Record(None, b"x"),
            Record(b"b", b"1"),
            Record(b"a", b"2", event_time_ms=5),
            Record(b"c", None),
            Record(b"d", b""),
        ],
    )
    TwoPhaseCompactor(rocks.storage, MB).compact("t")
    rocks.publish("t", [Record(b"b", None), Record(b"e", b"9"), Record(None, b"y")])
    TwoPhaseCompactor(rocks.storage, MB).compact("t")


@pytest.mark.parametrize("retain", [False, True])
def test_healthy_compaction_verifies(rocks: RocksHarness, retain: bool) -> None:
    workload(rocks, retain)
    result = verify(rocks)
    assert result.ok and result.problems == []
    assert result.checked == (4 if retain else 2) == len(rocks.view("t"))
    assert len(result.digest) == 64 and result.digest == verify(rocks).digest


def test_before_any_run_there_is_nothing_to_check(rocks: RocksHarness) -> None:
    rocks.create_topic("t")
    rocks.publish("t", [Record(b"a", b"1")])
    result = verify(rocks)
    assert result.ok and result.checked == 0 and len(result.digest) == 64


def _value(msgs: list[pb.Message]) -> list[pb.Message]:
    msgs[0].value = b"tampered"
    return msgs


def _drop(msgs: list[pb.Message]) -> list[pb.Message]:
    return msgs[1:]


def _stale(msgs: list[pb.Message]) -> list[pb.Message]:
    stale = pb.Message()
    stale.CopyFrom(msgs[-1])
    stale.id.entry_id -= 1  # an older id of the same key
    return [*msgs[:-1], stale, msgs[-1]]


@pytest.mark.parametrize(
    ("change", "problem"),
    [(_value, "differs"), (_drop, "missing"), (_stale, "unexpected")],
)
def test_an_altered_compacted_ledger_is_detected(
    rocks: RocksHarness,
    tamper: Callable[..., int],
    change: Callable[[list[pb.Message]], list[pb.Message]],
    problem: str,
) -> None:
    workload(rocks)
    healthy = verify(rocks)
    tamper(rocks.store, "t", change)
    result = verify(rocks)
    assert not result.ok and any(problem in p for p in result.problems), result.problems
    assert result.digest != healthy.digest


def test_raw_history_trimmed_by_retention_is_checked_for_consistency(rocks: RocksHarness) -> None:
    workload(rocks)
    raw = len(rocks.store.topic("t").ledgers)
    rocks.store.update_config("t", {"ledger.max.entries": "4", "retention.bytes": "0"})
    rocks.store.enforce_retention("t")
    assert len(rocks.store.topic("t").ledgers) < raw
    result = verify(rocks)
    assert result.ok and result.checked == 2, result.problems


def test_canonical_encoding_ignores_property_order() -> None:
    one, two = pb.Message(key=b"k"), pb.Message(key=b"k")
    one.properties["a"], one.properties["b"] = "1", "2"
    two.properties["b"], two.properties["a"] = "2", "1"
    assert canonical(one) == canonical(two)
    assert canonical(pb.Message(key=b"")) != canonical(pb.Message())  # empty != absent
    assert canonical(pb.Message(value=b"")) != canonical(pb.Message())


def test_preview_writes_nothing_and_matches_the_run(rocks: RocksHarness) -> None:
    rocks.create_topic("t")
    rocks.publish("t", [Record(b"k%d" % (i % 7), b"v%d" % i) for i in range(50)])
    compactor = TwoPhaseCompactor(rocks.storage, MB)
    ledgers = rocks.ledger_ids()
    preview = compactor.preview(plan(rocks.store, "t"))
    assert rocks.ledger_ids() == ledgers
    assert "__compaction" not in rocks.store.topic("t").cursors  # not even the cursor
    run: Any = compactor.compact("t").run
    assert (preview.read, preview.kept, preview.bytes_in, preview.bytes_out) == (
        run.read,
        run.kept,
        run.bytes_in,
        run.bytes_out,
    )
