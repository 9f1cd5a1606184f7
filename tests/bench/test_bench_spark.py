"""``compactlog bench spark``: a run on the tests' Spark session times the raw Read and
a warm Spark read of the same topic and reports their ratio per Spark core."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from compactlog.bench import spark_rates

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_run_reads_every_message_both_ways(spark: Any) -> None:
    """The source's own plan (the JVM reader), a fixed cut (``--entries-per-partition``),
    the Python source beside it and the costless Python source replaying the batches
    recorded from the first, each timed (each query checks it counted every message and
    every value's bytes) and reported."""
    s = spark_rates.Settings(records=2500, runs=1, entries_per_partition=1000)
    m = spark_rates.one_run(s, 1, spark, spark_rates._requests(s.records))
    assert m["raw_read_mps"] > 0 and m["spark_read_mps"] > 0 and m["spark_fixed_mps"] > 0
    assert m["spark_replay_mps"] > 0 and m["spark_python_mps"] > 0
    assert m["spark_read.python_ratio"] == pytest.approx(
        m["spark_read_mps"] / m["spark_python_mps"]
    )
    assert m["spark_read.replay_ratio"] == pytest.approx(
        m["spark_read_mps"] / m["spark_replay_mps"]
    )
    assert m["spark_read.per_core_ratio"] == pytest.approx(m["spark_read.ratio"] / 2)
    assert m["load_avg"] >= 0
    assert m["spark_read_cpu_s"] > 0 and m["spark_python_cpu_s"] > 0
    results = {k: {"median": v, "samples": [v]} for k, v in m.items()}
    rows = spark_rates.rows(results, s.master, s.entries_per_partition)
    own, fixed, python, replay, beside, beside_python = rows
    assert own.meets == (m["spark_read.per_core_ratio"] >= spark_rates.GOAL)
    assert fixed.name == "the same, entriesPerPartition=1000"
    assert fixed.ratio == pytest.approx(m["spark_fixed.per_core_ratio"])
    assert python.name == "the Python source, format('compactlog-python'), local[2], warm"
    assert python.ratio == pytest.approx(m["spark_python.per_core_ratio"])
    assert beside_python.ratio == pytest.approx(m["spark_read.python_ratio"])
    assert replay.meets is None and replay.figure == m["spark_replay_mps"]
    assert replay.ratio == pytest.approx(m["spark_replay.per_core_ratio"])
    assert beside.floor == m["spark_replay_mps"]
    assert beside.ratio == pytest.approx(m["spark_read.replay_ratio"])
    assert "CPU seconds a timed query" in spark_rates.markdown(
        {"settings": {"records": 2500, "runs": 1, "master": s.master}, "spark_start_s": 1.0,
         "machine": {"cpu_model": "cpu", "cores": 2}, "results": results,
         "rows": [dataclasses.asdict(r) for r in rows]}
    )  # fmt: skip


def test_masters_give_their_cores() -> None:
    assert [spark_rates.cores(m) for m in ("local", "local[2]", "local[7]")] == [1, 2, 7]
    with pytest.raises(SystemExit, match="local\\[N\\]"):
        spark_rates.cores("yarn")
