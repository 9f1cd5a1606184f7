"""Workload generation is seeded and the expected view is the fold of the stream."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from compactlog.bench.workloads import (
    PROFILES,
    Workload,
    batches,
    compare_views,
    expected_view,
    fold,
)
from compactlog.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]


def flat(w: Workload, seed: int) -> list[tuple[bytes | None, bytes | None]]:
    return [r for batch in batches(w, seed) for r in batch]


@pytest.mark.parametrize("w", PROFILES["quick"], ids=lambda w: w.name)
def test_same_seed_same_records_and_view_is_the_fold(w: Workload) -> None:
    records = flat(w, 7)
    assert records == flat(w, 7)
    assert records != flat(w, 8)
    assert len(records) == w.records
    view, count, _ = fold(records)
    assert count == w.records
    assert view == expected_view(w, 7)
    assert all(v is None or len(v) == w.value_bytes for _k, v in records)
    assert all(len(b) <= w.publish_batch for b in batches(w, 7))


def test_shares_of_tombstones_and_keyless_records() -> None:
    w = Workload("t", 20_000, 1000, distribution="zipf", tombstone_share=0.1, keyless_share=0.05)
    records = flat(w, 1)
    tombstones = sum(1 for k, v in records if k is not None and v is None)
    keyless = sum(1 for k, _v in records if k is None)
    assert 1600 < tombstones < 2400 and 700 < keyless < 1300
    assert not any(v == b"" for _k, v in records)  # empty means different things per kind


def test_append_only_writes_each_key_once() -> None:
    keys = [k for k, _v in flat(PROFILES["quick"][2], 3) if k is not None]
    assert len(keys) == len(set(keys))
    with pytest.raises(ValueError):
        Workload("bad", 10, 5, pattern="append-only")


def test_compare_views_names_the_differing_key() -> None:
    expected = {b"a": b"1", b"b": b"2"}
    same = compare_views({"ledger": dict(expected), "segmented": dict(expected)}, expected)
    assert same.identical and same.differing_keys == []
    diff = compare_views({"ledger": dict(expected), "segmented": {b"a": b"1"}}, expected)
    assert not diff.identical and diff.differing_keys == ["b"]


def test_compactlog_bench_help_goes_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "--help"]) == 0
    assert "--profile" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize(
    "script",
    [
        ["bench_two_phase.py", "--messages", "5000", "--keys", "500", "--runs", "1"],
        ["bench_log_cleaner.py", "--records", "5000", "--keys", "500", "--runs", "1"],
    ],
)
def test_floor_sharing_scripts_still_run_as_scripts(script: list[str]) -> None:
    path = ROOT / "benchmarks" / script[0]
    done = subprocess.run([sys.executable, str(path), *script[1:]], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "floor" in done.stdout
