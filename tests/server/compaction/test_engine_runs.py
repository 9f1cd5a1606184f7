"""Outside compaction runs (the Spark engine's server side), without Spark: writes only
reach leased ledgers, in order; commits check the run's base; lapsed leases are swept;
and the TwoPhaseCompactor over the gRPC adapter matches the in-server run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog.compactor.two_phase import CompactionRun, TwoPhaseCompactor
from compactlog.compactor.two_phase.grpc_adapter import GrpcCompactionStorage
from compactlog.errors import CommitConflict, InvalidArgument, WrongTopicKind
from compactlog.server.compaction.engine_runs import OutsideRuns
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record, TopicKind
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, CompactionRun | None, str]] = []

    def record_outside_run(self, topic: str, run: CompactionRun | None, error: str = "") -> None:
        self.calls.append((topic, run, error))


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[tuple[OutsideRuns, LedgerStore, Clock, Recorder]]:
    store = LedgerStore(tmp_path / "ledgers", ServerSettings(topic_defaults={}))
    store.create_topic("t", {"ledger.max.entries": "4"})
    clock, recorder = Clock(), Recorder()

    def kind(name: str) -> TopicKind:
        return TopicKind.LEDGER if store.has_topic(name) else TopicKind.SEGMENTED

    yield OutsideRuns(store, kind, lambda name: (0, 0), recorder, clock), store, clock, recorder
    store.close()


def _entry(i: int) -> bytes:
    msg = pb.Message(key=b"k%d" % i, value=b"v")
    msg.id.ledger_id, msg.id.entry_id = 1, i
    return msg.SerializeToString()


def test_writes_only_to_leased_ledgers_in_order(runs: Any) -> None:
    outside, store, _clock, _rec = runs
    store.append("t", [Record(b"a", b"1")])
    with pytest.raises(InvalidArgument):  # a raw ledger is never writable from outside
        outside.append(1, 1, [_entry(0)])
    lid, _ = outside.create_ledger("t", 0)
    assert outside.append(lid, 0, [_entry(0), _entry(1)]) == 2
    with pytest.raises(InvalidArgument):
        outside.append(lid, 5, [_entry(5)])
    with pytest.raises(InvalidArgument):
        outside.seal(lid, 3)
    outside.seal(lid, 2)
    with pytest.raises(InvalidArgument):
        outside.append(lid, 2, [_entry(2)])
    with pytest.raises(WrongTopicKind):
        outside.begin("segmented-one")


def test_commit_checks_base_and_records(runs: Any) -> None:
    outside, store, _clock, rec = runs
    store.append("t", [Record(b"a", b"1"), Record(b"b", b"2")])
    inp = outside.begin("t")
    assert inp.horizon == MessageId(1, 1) and inp.previous_ledger is None
    first, _ = outside.create_ledger("t", 0)
    outside.append(first, 0, [_entry(0)])
    outside.seal(first, 1)
    second, _ = outside.create_ledger("t", 0)
    outside.seal(second, 0)
    outside.commit("t", first, MessageId(1, 1), None, None, CompactionRun(read=2, engine="spark"))
    assert store.topic("t").compacted_ledger_id() == first
    with pytest.raises(CommitConflict):  # began from "no compacted ledger": stale now
        outside.commit("t", second, MessageId(1, 1), None, None, CompactionRun())
    assert store.ledger(second) is None  # the loser's ledger is deleted at once
    assert [c[1].read if c[1] else None for c in rec.calls] == [2]


def test_lapsed_lease_and_abort_delete_the_ledger(runs: Any) -> None:
    outside, store, clock, rec = runs
    lid, lease_ms = outside.create_ledger("t", 1000)
    assert lease_ms == 1000 and outside.layout("t").pending[0][0] == lid
    clock.now = 0.9
    outside.append(lid, 0, [_entry(0)])  # renews the lease
    clock.now = 1.5
    assert outside.sweep() == []
    clock.now = 3.0
    assert outside.sweep() == [lid]
    assert store.ledger(lid) is None and not outside.layout("t").pending
    assert "lapsed" in rec.calls[-1][2]
    other, _ = outside.create_ledger("t", 0)
    outside.abort("t", other, "boom")
    assert store.ledger(other) is None and rec.calls[-1][2] == "boom"


@pytest.mark.parametrize("retention_ms", [0, 3_600_000], ids=["drop", "keep-tombstones"])
def test_grpc_adapter_run_equals_local_run(
    shared_server: Any, unique_topic: str, retention_ms: int
) -> None:
    """Also with reader-aware tombstone retention: the plan carries it to the outside run,
    which keeps the young tombstone as the in-server run does."""
    channel = __import__("grpc").insecure_channel(shared_server.address)
    admin, log = pb_grpc.TopicAdminStub(channel), pb_grpc.LogStub(channel)
    engine = pb_grpc.CompactionEngineStub(channel)
    twins = [unique_topic + "-a", unique_topic + "-b"]
    records = [pb.Record(key=b"k%d" % (i % 7), value=b"v%d" % i) for i in range(60)]
    records += [pb.Record(value=b"x"), pb.Record(key=b"k3")]
    config = {"ledger.max.entries": "9", "delete.retention.ms": str(retention_ms)}
    for name in twins:
        admin.CreateTopic(pb.CreateTopicRequest(name=name, config=config))
        log.Publish(pb.PublishRequest(topic=name, records=records))
    local = admin.Compact(pb.CompactRequest(topic=twins[0], wait=True)).last_run
    storage = GrpcCompactionStorage(shared_server.address, engine="outside")
    try:
        result = TwoPhaseCompactor(storage, 1 << 30, engine="outside").compact(twins[1])
    finally:
        storage.close()
    assert result.committed
    views = []
    for name in twins:
        req = pb.ReadRequest(topic=name, read_compacted=True)
        views.append([(m.key, m.value) for r in log.Read(req) for m in r.messages])
        lay = engine.GetTopicLayout(pb.GetTopicLayoutRequest(topic=name))
        assert not lay.pending
    assert views[0] == views[1] and len(views[0]) == (7 if retention_ms else 6)
    assert ((b"k3", b"") in views[0]) == bool(retention_ms)  # the tombstone, kept or not
    run = result.run
    assert (run.read, run.kept, run.tombstones, run.keyless_dropped, run.bytes_out) == (
        local.read,
        local.kept,
        local.tombstones,
        local.keyless_dropped,
        local.bytes_out,
    )
    channel.close()
