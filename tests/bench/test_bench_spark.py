"""``compactlog bench spark``: a run on the tests' Spark session times the raw Read and
a warm Spark read of the same topic and reports their ratio per Spark core."""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.bench import spark_rates

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_run_reads_every_message_both_ways(spark: Any) -> None:
    s = spark_rates.Settings(records=2500, runs=1)
    m = spark_rates.one_run(s, 1, spark, spark_rates._requests(s.records))
    assert m["raw_read_mps"] > 0 and m["spark_read_mps"] > 0
    assert m["spark_read.per_core_ratio"] == pytest.approx(m["spark_read.ratio"] / 2)
    results = {k: {"median": v, "samples": [v]} for k, v in m.items()}
    (row,) = spark_rates.rows(results, s.master)
    assert row.meets == (m["spark_read.per_core_ratio"] >= spark_rates.GOAL)


def test_masters_give_their_cores() -> None:
    assert [spark_rates.cores(m) for m in ("local", "local[2]", "local[7]")] == [1, 2, 7]
    with pytest.raises(SystemExit, match="local\\[N\\]"):
        spark_rates.cores("yarn")
