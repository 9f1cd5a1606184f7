"""``compactlog bench shards`` runs end to end on a tiny workload and prints its table."""

from __future__ import annotations

import pytest

from compactlog.bench import shards
from compactlog.storage.slots import SLOT_COUNT, slot_of


def test_the_bench_topics_sit_in_the_first_slots() -> None:
    assert [slot_of(t, SLOT_COUNT) for t in shards.topic_names()] == [0, 1, 2, 3]


@pytest.mark.slow
def test_bench_shards_quick(capsys: pytest.CaptureFixture[str]) -> None:
    assert shards.main(["--shards", "1,2", "--requests", "5", "--batch", "10"]) == 0
    out = capsys.readouterr().out
    assert "vs 1 shard" in out
    lines = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [line[0] for line in lines] == ["1", "2"]
    assert lines[0][2] == "1.00x"
