"""``compactlog bench --profile quick``: the report's structure and the cross-check.

One real run (both strategies, real server processes) is shared by the structural tests;
the figures themselves are not asserted (benchmarks report, they don't gate).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from compactlog.bench import cli as bench_cli
from compactlog.bench.strategy import STRATEGIES, StrategyResult
from compactlog.bench.workloads import PROFILES

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    out = tmp_path_factory.mktemp("bench-out")
    work = tmp_path_factory.mktemp("bench-work")
    argv = ["--profile", "quick", "--runs", "1", "--out", str(out), "--workdir", str(work)]
    return bench_cli.main(argv), out


@pytest.fixture(scope="module")
def report(quick_run: tuple[int, Path]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((quick_run[1] / "report.json").read_text())
    return data


def test_quick_run_succeeds(quick_run: tuple[int, Path]) -> None:
    code, out = quick_run
    assert code == 0
    assert {"report.md", "report.json"} <= {p.name for p in out.iterdir()}


def test_json_holds_every_section(report: dict[str, Any]) -> None:
    for key in (
        "profile",
        "runs",
        "seed",
        "machine",
        "versions",
        "workloads",
        "floors",
        "results",
        "cross_check",
        "targets",
        "plots",
        "latency_trace",
        "command",
    ):
        assert key in report, key  # fmt: skip
    assert {"cores", "memory_gb", "cpu_model"} <= report["machine"].keys()
    assert {"python", "rocksdict", "grpcio", "protobuf", "compactlog"} <= report["versions"].keys()
    assert {"write_rps", "scan_rps", "file_write_bps", "file_read_bps"} <= report["floors"].keys()
    names = [w.name for w in PROFILES["quick"]]
    assert [w["name"] for w in report["workloads"]] == names
    for name in names:
        assert set(report["results"][name]) == set(STRATEGIES)
        for kind, metrics in report["results"][name].items():
            for key in ("publish_rps", "compaction_rps", "disk_before_bytes", "disk_after_bytes",
                        "write_amp", "compaction_p99_ms", "rss_peak_compaction_bytes",
                        "raw_read_s", "compacted_read_s"):  # fmt: skip
                agg = metrics[key]
                assert agg["min"] <= agg["median"] <= agg["max"], (name, kind, key)
                assert len(agg["samples"]) == 1
    assert "compaction_floor_ratio" in report["results"][names[0]]["ledger"]


def test_targets_table_has_every_target_with_a_floor_ratio(
    report: dict[str, Any], quick_run: tuple[int, Path]
) -> None:
    rows = report["targets"]
    names = {r["name"] for r in rows}
    assert any("PublishStream" in n for n in names)
    assert any("Read" in n for n in names)
    assert any("unary Publish" in n for n in names)
    assert any("TwoPhaseCompactor" in n for n in names)
    assert any("LogCleaner" in n for n in names)
    assert all(r["floor"] > 0 and r["ratio"] > 0 for r in rows)
    md = (quick_run[1] / "report.md").read_text()
    assert "| target (issue) | strategy | figure | target | meets | floor | vs floor |" in md
    assert md.count("| TwoPhaseCompactor (local engine) | LEDGER |") == 1
    for wl in PROFILES["quick"]:
        assert f"### {wl.name}" in md


def test_plots_are_valid_pngs(report: dict[str, Any], quick_run: tuple[int, Path]) -> None:
    assert set(report["plots"]) == {"throughput.png", "space.png", "latency.png"}
    for name in report["plots"]:
        data = (quick_run[1] / name).read_bytes()
        assert data[:8] == PNG_SIGNATURE, name
        length, kind = struct.unpack(">I4s", data[8:16])
        width, height = struct.unpack(">II", data[16:24])
        assert kind == b"IHDR" and length == 13 and width > 100 and height > 100
        assert data[-8:-4] == b"IEND"


def test_both_strategies_leave_identical_views(
    report: dict[str, Any], quick_run: tuple[int, Path]
) -> None:
    for name, check in report["cross_check"].items():
        assert check["identical"], name
        assert check["differing_keys"] == []
        assert len(set(check["digests"].values())) == 1
        assert set(check["digests"]) == {"expected", *STRATEGIES}
    assert "**identical**" in (quick_run[1] / "report.md").read_text()


def test_a_view_mismatch_fails_the_run_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = bench_cli.run_strategy

    def corrupting(kind: str, *args: Any, **kwargs: Any) -> StrategyResult:
        result = real(kind, *args, **kwargs)
        if kind == "segmented":
            key = next(iter(result.view))
            result.view[key] = b"\0" * 8  # one wrong latest value
        return result

    monkeypatch.setattr(bench_cli, "run_strategy", corrupting)
    argv = ["--profile", "quick", "--runs", "1", "--workload", "uniform-10KB",
            "--out", str(tmp_path / "out"), "--workdir", str(tmp_path / "work")]  # fmt: skip
    assert bench_cli.main(argv) == bench_cli.EXIT_CROSS_CHECK
    assert "CROSS-CHECK FAILED" in capsys.readouterr().err
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    check = data["cross_check"]["uniform-10KB"]
    assert not check["identical"] and len(check["differing_keys"]) == 1
    assert "**FAILED**" in (tmp_path / "out" / "report.md").read_text()
