"""``compactlog bench shards`` runs end to end on a tiny workload and prints its table."""

from __future__ import annotations

import pytest

from compactlog.bench import shards
from compactlog.partitioner import partition_for_key, partition_name
from compactlog.storage.slots import SLOT_COUNT, Placement, slot_of


def test_the_bench_topics_sit_in_the_first_slots() -> None:
    assert [slot_of(t, SLOT_COUNT) for t in shards.topic_names()] == [0, 1, 2, 3]


def test_the_bench_partitions_sit_in_the_first_slots_under_partition_placement() -> None:
    name = shards.partitioned_name()
    slots = [slot_of(partition_name(name, p), SLOT_COUNT, Placement.PARTITION) for p in range(4)]
    assert slots == [0, 1, 2, 3]


def test_each_partitions_generator_sends_the_keys_routed_there() -> None:
    s = shards.Settings((1,), requests=3, batch=5, value_bytes=1, keys=50, durability="wal", runs=1)
    for partition in range(4):
        keys = shards._keys(s, partition)
        assert keys and {partition_for_key(k, 4) for k in keys} == {partition}
    assert len(shards._keys(s, None)) == 50


@pytest.mark.slow
def test_bench_shards_quick(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--shards", "1,2", "--requests", "5", "--batch", "10", "--partitioned"]
    assert shards.main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "vs 1 shard" in out
        and "1 topic x 4 parts" in out
        and "spanning" in out
        and "compact 1x4" in out
    )
    lines = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [line[0] for line in lines] == ["1", "2"]
    assert lines[0][2] == "1.00x" and lines[0][-1] == "1.00x"
    # the partitioned and the spanning figures beside the others
    assert all(len(line) == 11 for line in lines)
