"""``compactlog bench partitions`` runs end to end and prints a row per kind and case."""

from __future__ import annotations

import pytest

from compactlog.bench import bench_partitions


def test_prints_one_topic_and_partitioned_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_partitions.main(["--batches", "3", "--batch", "20", "--durability", "wal"]) == 0
    out = capsys.readouterr().out
    for kind in ("ledger", "segmented"):
        assert f"{kind:<10} one topic" in out
        assert f"{kind:<10} 4 partitions" in out
