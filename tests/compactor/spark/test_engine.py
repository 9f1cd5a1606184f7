"""The Spark engine against the local engine: identical compacted ledgers, byte for byte,
over random workloads and several runs in a row with the engines mixed; identical run
figures; a Spark run racing a local run commits once."""

from __future__ import annotations

import random
import shutil
from typing import Any

import pytest

from compactlog.compactor.spark import run_spark_compaction
from compactlog.compactor.two_phase.grpc_adapter import GrpcCompactionStorage
from compactlog.compactor.two_phase.phase_one import PhaseOneResult, find_winners
from compactlog.errors import CommitConflict
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Api

pytestmark = pytest.mark.spark


def local_result(address: str, topic: str) -> tuple[list[bytes], PhaseOneResult]:
    """What the local engine would write now: its phase one and phase two, no commit."""
    storage = GrpcCompactionStorage(address)
    try:
        inp = storage.begin(topic)
        winners = find_winners(storage, inp, 1 << 40)
        out = []
        for index, seg in enumerate(inp.segments):
            bits = winners.selection(storage, index, seg)
            for _eid, data in storage.read_entries(seg, bits) if any(bits) else ():
                out.append(data)  # Message bytes, original id included
        return out, winners
    finally:
        storage.close()


def random_records(rng: random.Random, n: int, keys: int) -> list[pb.Record]:
    out = []
    for _ in range(n):
        r = pb.Record(event_time_ms=rng.randrange(0, 10**12))
        if rng.random() < 0.9:
            r.key = b"key-%d" % rng.randrange(keys)
        roll = rng.random()
        if roll < 0.1:
            pass  # null value
        elif roll < 0.15:
            r.value = b""
        else:
            r.value = rng.randbytes(rng.randrange(1, 40))
        if rng.random() < 0.2:
            r.properties["p"] = str(rng.random())
        out.append(r)
    return out


@pytest.mark.parametrize("retain", [False, True])
def test_spark_equals_local_mixed_runs(
    spark: Any, shared_server: Any, api: Any, retain: bool
) -> None:
    a: Api = api(shared_server.address)
    rng = random.Random(7 + retain)
    topic = f"eng-mixed-{retain}"
    a.create(topic, ledger_max_entries="300", compaction_retain_null_key=str(retain).lower())
    for engine in ("spark", "local", "spark"):
        a.publish(topic, random_records(rng, rng.randrange(200, 900), rng.choice([5, 50, 400])))
        expected, winners = local_result(a.address, topic)
        if engine == "spark":
            result = run_spark_compaction(a.address, topic, spark=spark)
            assert result.committed and result.run.engine == "spark"
        else:
            a.admin.Compact(pb.CompactRequest(topic=topic, wait=True))
        assert a.compacted_entries(topic) == expected
        status = a.status(topic)
        assert status.state == pb.CompactionStatus.SUCCESS
        run = status.last_run
        assert run.engine == engine
        figures = (run.read, run.kept, run.tombstones, run.keyless_dropped, run.bytes_in)
        assert figures == (
            winners.read,
            winners.kept,
            winners.tombstones,
            winners.keyless_dropped,
            winners.bytes_in,
        )
        assert run.removed == run.read - run.kept
        assert run.bytes_out == sum(map(len, expected))
        assert not a.layout(topic).pending
    assert run_spark_compaction(a.address, topic, spark=spark).committed is False


def test_spark_run_racing_a_local_run_commits_once(
    spark: Any, shared_server: Any, api: Any
) -> None:
    a: Api = api(shared_server.address)
    rng = random.Random(3)
    topic = "eng-race"
    a.create(topic, ledger_max_entries="100")
    a.publish(topic, random_records(rng, 500, 60))
    a.admin.Compact(pb.CompactRequest(topic=topic, wait=True))
    a.publish(topic, random_records(rng, 300, 60))
    expected, _ = local_result(a.address, topic)

    def local_run_wins(point: str) -> None:
        if point == "after_seal":  # the Spark run's ledger is written and sealed
            a.admin.Compact(pb.CompactRequest(topic=topic, wait=True))

    with pytest.raises(CommitConflict):
        run_spark_compaction(a.address, topic, spark=spark, fault=local_run_wins)
    assert a.compacted_entries(topic) == expected  # the local run's ledger, committed once
    status = a.status(topic)
    assert status.state == pb.CompactionStatus.SUCCESS and status.last_run.engine == "local"
    assert not a.layout(topic).pending  # the loser's ledger is gone


def test_both_engines_compacted_views_have_one_digest(
    spark: Any, server_factory: Any, api: Any
) -> None:
    """Two servers on copies of one data dir: the local engine compacts one, Spark the
    other; VerifyCompaction passes on both and gives both views the same digest."""
    first = server_factory()
    a: Api = api(first.address)
    rng = random.Random(11)
    a.create("d", ledger_max_entries="150", compaction_retain_null_key="true")
    a.publish("d", random_records(rng, 700, 60))
    first.stop()
    copy = first.data_dir.parent / "copy"
    shutil.copytree(first.data_dir, copy)
    first.start()
    second = server_factory(data_dir=copy)
    a, b = api(first.address), api(second.address)
    a.admin.Compact(pb.CompactRequest(topic="d", wait=True))
    assert run_spark_compaction(b.address, "d", spark=spark).committed
    assert (a.status("d").last_run.engine, b.status("d").last_run.engine) == ("local", "spark")
    request = pb.VerifyCompactionRequest(topic="d")
    local, remote = a.admin.VerifyCompaction(request), b.admin.VerifyCompaction(request)
    assert local.ok and remote.ok and local.checked == remote.checked > 0
    assert local.compacted_ledger_id == remote.compacted_ledger_id
    assert local.digest == remote.digest


def test_spark_keeps_the_tombstones_the_run_retains(
    spark: Any, shared_server: Any, api: Any
) -> None:
    """Reader-aware retention reaches an outside run through its plan: with a long
    ``delete.retention.ms`` the Spark run keeps each key's winning tombstone, as a local
    run over a twin topic does, and counts it kept, not removed."""
    a: Api = api(shared_server.address)
    rng = random.Random(19)
    records = random_records(rng, 600, 40)
    records += [pb.Record(key=b"key-%d" % k) for k in range(0, 40, 3)]  # certain tombstones
    twins = ("eng-keep-spark", "eng-keep-local")
    for name in twins:
        a.create(name, ledger_max_entries="150", delete_retention_ms="3600000")
        a.publish(name, records)
    assert run_spark_compaction(a.address, twins[0], spark=spark).committed
    a.admin.Compact(pb.CompactRequest(topic=twins[1], wait=True))
    views = [[row[2:4] for row in a.read(name, compacted=True)] for name in twins]
    assert views[0] == views[1]
    assert sum(1 for key, value in views[0] if key is not None and not value) >= 14
    runs = [a.status(name).last_run for name in twins]
    assert runs[0].engine == "spark" and runs[1].engine == "local"
    for field in ("read", "kept", "removed", "tombstones", "keyless_dropped"):
        assert getattr(runs[0], field) == getattr(runs[1], field), field
