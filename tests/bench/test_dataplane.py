"""``compactlog bench dataplane --quick``: the report's structure, against real processes.

One quick run (a real ``compactlog serve`` per kind, the bare gRPC floor in its own
process) is shared by the structural tests. Figures are not asserted against goals
(benchmarks report, they don't gate); only that every row has a measured figure, a
measured floor and their ratio.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from typing import Any

import pytest

from compactlog.bench import dataplane
from compactlog.bench.dataplane_runs import KINDS, QUICK, Settings
from compactlog.bench.summary import num

# publish beside two floors, raw read, compacted read, Compact beside the raw read, unary
# p50, unary p99 beside the echo and beside a synced put, RSS growth
ROWS_PER_KIND = 9
HEADER = "| measure | strategy | figure | target | meets | floor | vs floor |"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("dataplane")
    argv = ["--quick", "--json", str(out / "dataplane.json"), "--workdir", str(out / "work")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = dataplane.main(argv)
    report: dict[str, Any] = json.loads((out / "dataplane.json").read_text())
    return code, printed.getvalue(), report


def test_quick_run_succeeds_and_prints_the_table(
    quick_run: tuple[int, str, dict[str, Any]],
) -> None:
    code, printed, report = quick_run
    assert code == 0
    assert HEADER in printed
    assert report["suite"] == "compactlog bench dataplane"
    assert report["command"].startswith("compactlog bench dataplane --quick")
    assert {"cores", "cpu_model"} <= report["machine"].keys()
    assert {"grpcio", "rocksdict", "protobuf"} <= report["versions"].keys()
    assert report["settings"]["records"] == QUICK["records"]
    assert len(report["load_average"]) == 2 and "Load average (1 min)" in printed


def test_every_row_has_a_figure_a_floor_and_their_ratio(
    quick_run: tuple[int, str, dict[str, Any]],
) -> None:
    rows = quick_run[2]["rows"]
    assert len(rows) == ROWS_PER_KIND * len(KINDS) + 1  # SEGMENTED's publish with rolls
    for kind in KINDS:
        rolling = kind == "segmented"
        assert sum(r["strategy"] == kind for r in rows) == ROWS_PER_KIND + rolling
        assert sum(r["name"] == dataplane.ROLLING for r in rows if r["strategy"] == kind) == rolling
    for r in rows:
        assert r["figure"] > 0 and r["floor"] > 0, r
        assert r["ratio"] == pytest.approx(r["figure"] / r["floor"], rel=1e-9), r
        assert r["ratio_meaning"] == "figure / floor"
        assert r["floor_name"].startswith(("bare gRPC", "one raw Read")), r
        rolls = r["name"] == dataplane.ROLLING  # the cost of rolls, shown, not a goal
        no_goal = ("bare gRPC, one synced", "bare gRPC unary + one synced")
        if rolls or "p50" in r["name"] or r["floor_name"].startswith(no_goal):
            assert r["meets"] is None and r["target"] == "n/a"
        else:
            assert isinstance(r["meets"], bool), r
    names = {r["name"] for r in rows}
    for part in ("PublishStream", "Read, raw", "Read, compacted", "p50", "p99", "RSS growth"):
        assert any(part in n for n in names), part


def test_printed_ratios_are_figure_over_floor_within_rounding(
    quick_run: tuple[int, str, dict[str, Any]],
) -> None:
    printed, rows = quick_run[1], quick_run[2]["rows"]
    lines = [ln for ln in printed.splitlines() if ln.startswith("| ") and "(figure / floor)" in ln]
    assert len(lines) == len(rows)
    for line, r in zip(lines, rows, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == r["name"] and cells[1] == r["strategy"].upper()
        assert cells[2] == f"{num(r['figure'])} {r['unit']}"
        assert cells[5].startswith(f"{num(r['floor'])} {r['unit']} (")
        assert cells[6] == f"{num(r['ratio'])} (figure / floor)"
        figure, floor, ratio = (shown_bounds(c.split()[0]) for c in (cells[2], cells[5], cells[6]))
        # the printed ratio, within its own rounding, lies where the printed figure and floor
        # (each within its rounding) put it
        assert ratio[0] <= figure[1] / floor[0] and ratio[1] >= figure[0] / floor[1], cells


def shown_bounds(text: str) -> tuple[float, float]:
    """The interval a printed figure stands for: half a unit of its last place either side."""
    digits = re.sub(r"[^0-9.]", "", text)
    places = len(digits.split(".")[1]) if "." in digits else 0
    half = 0.5 * 10.0**-places
    return float(digits) - half, float(digits) + half


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        (123456.7, "123,457"),
        (42.06, "42.1"),
        (0.47, "0.47"),
        (0.0095, "0.00950"),
        (0.012345, "0.0123"),
        (0.00012345, "0.000123"),
        (0.0, "0.00"),
    ],
)
def test_small_figures_keep_their_significant_digits(value: float, printed: str) -> None:
    assert num(value) == printed


def test_results_hold_one_sample_per_run(quick_run: tuple[int, str, dict[str, Any]]) -> None:
    report = quick_run[2]
    floors = ("floor.publish_rps", "floor.group_commit.publish_rps", "floor.echo.p99_ms")
    for key in (*floors, *(f"{k}.publish_rps" for k in KINDS)):
        agg = report["results"][key]
        assert len(agg["samples"]) == 1 and agg["min"] <= agg["median"] <= agg["max"], key
    for kind in KINDS:
        assert report["results"][f"{kind}.raw_read_messages"]["median"] == QUICK["records"]
        assert report["memory"][f"{kind}.memory_messages"]["median"] > 0


def test_publish_stands_beside_both_floors(quick_run: tuple[int, str, dict[str, Any]]) -> None:
    printed, report = quick_run[1], quick_run[2]
    results = {k: v["median"] for k, v in report["results"].items()}
    for kind in KINDS:
        publish = [r for r in report["rows"] if r["strategy"] == kind and "Publish" in r["name"]]
        publish = [
            r for r in publish if "unary" not in r["name"] and r["name"] != dataplane.ROLLING
        ]
        assert [r["floor_name"] for r in publish] == [dataplane.GROUP_COMMIT, dataplane.SYNCED_PUTS]
        assert [r["floor"] for r in publish] == [
            results["floor.group_commit.publish_rps"],
            results["floor.publish_rps"],
        ]
        assert all(r["figure"] == results[f"{kind}.publish_rps"] for r in publish)
    [rolling] = [r for r in report["rows"] if r["name"] == dataplane.ROLLING]
    assert rolling["strategy"] == "segmented" and rolling["meets"] is None
    assert rolling["figure"] == results["segmented.publish_rolling_rps"]
    assert rolling["floor"] == results["floor.group_commit.publish_rps"]
    assert "requests per WAL fsync" in printed


def test_per_run_publish_ratios_are_in_the_json_and_printed(
    quick_run: tuple[int, str, dict[str, Any]],
) -> None:
    printed, report = quick_run[1], quick_run[2]
    ratios = report["publish_ratios"]
    assert set(ratios) == {
        f"{k}.publish_rps/{floor}" for k in KINDS for floor in dataplane.PUBLISH_FLOORS
    }
    floor_of = {
        dataplane.GROUP_COMMIT: "floor.group_commit.publish_rps",
        dataplane.SYNCED_PUTS: "floor.publish_rps",
    }
    publish = (r for r in report["rows"] if r["name"] != dataplane.ROLLING)
    for r in (r for r in publish if r["floor_name"] in floor_of):
        # one run: the median of the per-run ratios is the table's ratio of medians
        agg = ratios[f"{r['strategy']}.publish_rps/{floor_of[r['floor_name']]}"]
        assert agg["samples"] == [pytest.approx(r["ratio"])]
    assert "Per-run PublishStream ratios" in printed


def test_compaction_stands_beside_the_raw_read_of_the_same_run(
    quick_run: tuple[int, str, dict[str, Any]],
) -> None:
    report = quick_run[2]
    results = {k: v["median"] for k, v in report["results"].items()}
    for kind, run in (("ledger", "two-phase run"), ("segmented", "cleaner pass")):
        [row] = [r for r in report["rows"] if r["strategy"] == kind and "Compact" in r["name"]]
        assert row["name"].startswith(run)
        assert (row["figure"], row["floor"]) == (
            results[f"{kind}.compaction_s"],
            results[f"{kind}.raw_read_s"],
        )
        assert row["unit"] == "s" and row["target"] == "<= 1.0 x raw Read"
        assert row["meets"] == (row["figure"] <= row["floor"])
        # the client's clock covers the server's own account of the run
        assert 0 < results[f"{kind}.compaction_run_s"] <= results[f"{kind}.compaction_s"] + 0.001


def test_compaction_cpu_stands_beside_the_raw_reads_server_cpu(
    quick_run: tuple[int, str, dict[str, Any]],
) -> None:
    """The run's CPU is the server's and its workers' (a run happens in a worker: the
    server alone would show almost none), the Read's the server's, both from /proc (in
    clock ticks of 10 ms: a quick run's may round to 0; ``test_procstats`` shows a
    child's CPU counted)."""
    _code, printed, report = quick_run
    results = {k: v["median"] for k, v in report["results"].items()}
    line = [ln for ln in printed.splitlines() if ln.startswith("CPU of Compact")]
    assert len(line) == 1
    for kind in KINDS:
        assert results[f"{kind}.compaction_cpu_s"] >= 0
        assert results[f"{kind}.raw_read_server_cpu_s"] >= 0
        assert results[f"{kind}.compacted_read_server_cpu_s"] >= 0
        cpu = f"{kind.upper()} {results[f'{kind}.compaction_cpu_s']:.2f} s"
        assert cpu in line[0]


def test_the_group_commit_floor_counts_what_it_stored(
    quick_run: tuple[int, str, dict[str, Any]],
) -> None:
    results = {k: v["median"] for k, v in quick_run[2]["results"].items()}
    requests = -(-QUICK["records"] // 1000)  # 1,000 records a request
    assert results["floor.group_commit.publish_records"] == QUICK["records"]
    assert results["floor.group_commit.requests"] == requests
    assert 1 <= results["floor.group_commit.syncs"] <= requests


def test_quick_fills_only_what_was_not_given() -> None:
    args = dataplane.build_parser().parse_args(
        ["--quick", "--records", "3000", "--kinds", "ledger"]
    )
    s = dataplane.settings_from(args)
    assert s == Settings(**{**QUICK, "records": 3000, "kinds": ("ledger",)})  # type: ignore[arg-type]
    assert dataplane.settings_from(dataplane.build_parser().parse_args([])) == Settings()


@pytest.mark.parametrize("argv", [["--kinds", "kafka"], ["--kinds", ","], ["--runs", "0"]])
def test_bad_options_are_one_line_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit, match="compactlog bench dataplane"):
        dataplane.settings_from(dataplane.build_parser().parse_args(argv))


def test_the_bench_command_reaches_the_workload(capsys: pytest.CaptureFixture[str]) -> None:
    from compactlog.cli import main as cli_main

    assert cli_main(["bench", "dataplane", "--help"]) == 0
    assert "compactlog bench dataplane" in capsys.readouterr().out


def test_without_memory_the_rss_rows_are_left_out() -> None:
    med = {
        "ledger.publish_rps": 2.0, "floor.publish_rps": 4.0,
        "floor.group_commit.publish_rps": 8.0,
        "ledger.raw_read_mps": 1.0, "floor.ledger.raw_read_mps": 1.0,
        "ledger.compacted_read_mps": 3.0, "floor.ledger.compacted_read_mps": 2.0,
        "ledger.compaction_s": 0.5, "ledger.raw_read_s": 0.25,
        "ledger.unary.p50_ms": 1.0, "floor.echo.p50_ms": 0.5,
        "ledger.unary.p99_ms": 4.0, "floor.echo.p99_ms": 1.0,
        "floor.synced_unary.p99_ms": 5.0,
    }  # fmt: skip
    rows = dataplane.rows(med, ("ledger",), 0)
    # the synced-put floors are shown beside the fair ones without a goal of their own
    assert [r.meets for r in rows] == [False, None, True, True, False, None, False, None]
    assert [r.ratio for r in rows] == [0.25, 0.5, 1.0, 1.5, 2.0, 2.0, 4.0, 0.8]


def test_targets_are_the_issues_goals(quick_run: tuple[int, str, dict[str, Any]]) -> None:
    """Publish 0.6 of the fair floor, raw Read 0.8, compacted Read 0.6, Compact within one
    raw Read, unary p99 2 ms (issue 29's goals); each row's verdict follows its ratio."""
    goals = {
        "PublishStream": ">= 0.6 x floor",
        "Read, raw": ">= 0.8 x floor",
        "Read, compacted": ">= 0.6 x floor",
        "Compact(wait=true)": "<= 1.0 x raw Read",
        "p99": "<= 2 ms",
    }
    for r in quick_run[2]["rows"]:
        if r["meets"] is None:
            continue
        (goal,) = [g for part, g in goals.items() if part in r["name"]] or [r["target"]]
        assert r["target"] == goal, r
        if goal.endswith("x floor"):
            assert r["meets"] == (r["ratio"] >= float(goal.split()[1])), r
