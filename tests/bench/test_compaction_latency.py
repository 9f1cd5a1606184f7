"""``compactlog bench compaction-latency --quick``: the report's structure, against real
servers. Figures are not asserted against goals (benchmarks report, they don't gate)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from compactlog.bench import cli
from compactlog.bench.compaction_latency_runs import KINDS, QUICK

pytestmark = pytest.mark.slow


def test_quick_run_prints_every_row_beside_its_floor(tmp_path: Path) -> None:
    argv = ["compaction-latency", "--quick", "--json", str(tmp_path / "r.json"),
            "--workdir", str(tmp_path / "work")]  # fmt: skip
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(argv) == 0
    report: dict[str, Any] = json.loads((tmp_path / "r.json").read_text())
    assert report["suite"] == "compactlog bench compaction-latency"
    assert report["settings"]["records"] == QUICK["records"]
    assert "| unary Publish p99 during a compaction of 20,000 messages | LEDGER |" in (
        printed.getvalue()
    )
    rows = report["rows"]
    # p99 (per run, pooled, pooled during a preview), p50 and MB/s against 4 read floors
    # each; LEDGER's p99 during a verification and its run
    assert len(rows) == 8 * len(KINDS) + 2
    for r in rows:
        assert r["figure"] > 0 and r["floor"] > 0, r
    floors = {r["floor_name"] for r in rows if r["unit"] == "MB/s"}
    assert {n for n in floors if "of the same files" in n} == {
        "read of the same files (page cache)",
        "read of the same files, cold (fadvise DONTNEED)",
        "copy loop of the same files (read + write + fsync)",
    }
    for kind in KINDS:
        assert report["results"][f"{kind}.during_calls"]["median"] > 0
        runs = report["settings"]["runs"]
        pooled = report["pooled"]  # every run's calls: as many as the runs made together
        assert pooled[f"{kind}.idle_calls"] == runs * report["settings"]["idle_calls"]
        assert pooled[f"{kind}.during_calls"] == sum(
            report["results"][f"{kind}.during_calls"]["samples"]
        )
        assert pooled[f"{kind}.during_p99_ms"] > 0
        assert pooled[f"{kind}.preview_calls"] > 0 and pooled[f"{kind}.preview_p99_ms"] > 0
        assert report["results"][f"{kind}.preview_s"]["median"] > 0
        assert report["results"][f"{kind}.files_mb"]["median"] > 0  # the topic's own files
        read = report["results"][f"{kind}.compaction_read"]["median"]
        assert QUICK["records"] // 2 <= read <= QUICK["records"]  # not the active segment
    pooled = report["pooled"]
    assert pooled["ledger.verify_calls"] > 0 and "segmented.verify_calls" not in pooled
