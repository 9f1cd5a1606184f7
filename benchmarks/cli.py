"""``compactlog bench``: Pulsar-style and Kafka-style compaction on the same workloads.

Each run measures the floors, then puts every workload of the profile through both
strategies (each in a fresh server and data dir), cross-checks the latest-value-per-key
views they leave, and at the end writes ``report.md``, ``report.json`` and PNG plots.

    compactlog bench                          # default profile, 3 runs
    compactlog bench --profile quick --runs 1 # seconds
    compactlog bench --profile full           # 1M-2M records per workload
    compactlog bench dataplane [--quick]      # publish/read/latency/memory vs bare gRPC
    compactlog bench client [--quick]         # the Python client vs raw gRPC, same server
    compactlog bench spark [--quick]          # the Spark source vs raw gRPC, same server
    compactlog bench compaction-latency       # Publish p99 idle vs during a compaction
    compactlog bench key-history              # GetKeyHistory in a 1M-message topic
    compactlog bench as-of                    # reading the past vs compaction, compacted read
    compactlog bench capacity                 # 1,000 follow readers + 1,000 consumers
    compactlog bench soak [--seconds N]       # produce, consume, compact, restart; invariants
    compactlog bench partitions               # PublishStream: 4 partitions vs one topic
    compactlog bench shards [--shards 1,2,4,8]  # serve --shards N: publish and compaction scaling
    compactlog bench kafka [--quick]          # librdkafka producer/consumer vs gRPC, same server
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from compactlog.bench import plots
from compactlog.bench.bench_server import rocksdb_floor
from compactlog.bench.floors import io_floor_rates
from compactlog.bench.report import (
    RunResults,
    aggregate_floors,
    aggregate_runs,
    targets,
    write_json,
    write_markdown,
)
from compactlog.bench.strategy import STRATEGIES, run_strategy
from compactlog.bench.summary import machine, targets_markdown, versions
from compactlog.bench.workloads import PROFILES, CrossCheck, Workload, compare_views, expected_view

EXIT_CROSS_CHECK = 3


class Progress:
    """A step counter drawn as a bar on stderr when it is a terminal, silent otherwise."""

    WIDTH = 30

    def __init__(self, total: int, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.total, self.done = total, 0
        self.started = time.monotonic()
        self.what = ""

    def label(self, what: str) -> None:
        self.what = what
        self._draw()

    def labeller(self, prefix: str) -> Callable[[str], None]:
        """A ``label`` that puts ``prefix`` first (one per workload and strategy)."""
        return lambda what: self.label(f"{prefix}: {what}")

    def advance(self) -> None:
        self.done += 1
        self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        filled = self.WIDTH * self.done // max(1, self.total)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        elapsed = time.monotonic() - self.started
        self.stream.write(f"\r\033[K[{bar}] {self.done}/{self.total} {elapsed:6.1f}s {self.what}")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\r\033[K")
            self.stream.flush()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compactlog bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="default",
        help="workload sizes: quick (seconds), default (minutes), full (1M+ records)",
    )
    p.add_argument("--runs", type=int, default=3, help="runs to take the median over")
    p.add_argument("--seed", type=int, default=42, help="workload seed (same seed, same data)")
    p.add_argument(
        "--workload",
        action="append",
        default=None,
        metavar="NAME",
        help="run only these workloads of the profile (repeatable); the first "
        "one given feeds the targets table",
    )
    p.add_argument(
        "--durability",
        choices=["fsync", "wal"],
        default="fsync",
        help="server publish.durability (default fsync, the server's default)",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="results folder (default results/bench-<timestamp>/)"
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where the servers' data dirs go (default: the system temp dir)",
    )
    p.add_argument(
        "--unary-samples",
        type=int,
        default=None,
        help="unary Publish calls timed at idle (default 50 quick, 500 otherwise)",
    )
    return p  # fmt: skip


def select(profile: str, names: list[str] | None) -> list[Workload]:
    available = {w.name: w for w in PROFILES[profile]}
    if not names:
        return list(available.values())
    unknown = [n for n in names if n not in available]
    if unknown:
        raise SystemExit(f"compactlog bench: unknown workload {unknown}; have {list(available)}")
    return [available[n] for n in names]


def measure_floors(tmp: Path, target: Workload) -> dict[str, float]:
    """RocksDB and sequential-file floors sized like the targets' workload."""
    floors = rocksdb_floor(tmp / "floor-rocksdb", max(target.records, 20_000), 1000,
                           target.value_bytes)  # fmt: skip
    nbytes = min(1 << 30, max(16 << 20, target.records * target.record_bytes))
    floors.update(io_floor_rates(tmp, nbytes))
    shutil.rmtree(tmp / "floor-rocksdb", ignore_errors=True)
    return floors


# The suites with their own workload, options and report: ``compactlog bench NAME ...``
# runs ``compactlog.bench.<module>.main`` (imported only when asked for).
SUITES = {
    "dataplane": "dataplane",
    "client": "client_rates",
    "spark": "spark_rates",
    "as-of": "bench_as_of",
    "compaction-latency": "compaction_latency",
    "key-history": "key_history",
    "capacity": "capacity",
    "shards": "shards",
    "partitions": "bench_partitions",
    "kafka": "kafka_wire",
    "soak": "soak",
}


def main(argv: list[str]) -> int:
    suite = SUITES.get(argv[0]) if argv else None
    if suite is not None:
        module = importlib.import_module(f"compactlog.bench.{suite}")
        return int(module.main(argv[1:]))
    args = build_parser().parse_args(argv)
    if args.runs < 1:
        raise SystemExit("compactlog bench: --runs must be >= 1")
    workloads = select(args.profile, args.workload)
    started = dt.datetime.now()
    out: Path = args.out or Path("results") / f"bench-{started:%Y%m%d-%H%M%S}"
    out.mkdir(parents=True, exist_ok=True)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    measured = _run_strategies(args, workloads)
    report = build_report(args, argv, workloads, *measured, started)
    report["duration_s"] = time.perf_counter() - t_start
    return _write_report(out, report, measured[2], workloads[0])


Measured = tuple[
    list[RunResults],
    list[dict[str, float]],
    dict[str, list[tuple[float, float]]],
    dict[str, list[CrossCheck]],
]


def _run_strategies(args: argparse.Namespace, workloads: list[Workload]) -> Measured:
    """Every run: the floors, then each workload through both strategies, their views
    cross-checked; the first run's first workload keeps its publish traces."""
    unary = args.unary_samples or (50 if args.profile == "quick" else 500)
    bar = Progress(args.runs * (1 + len(workloads) * len(STRATEGIES)))
    runs: list[RunResults] = []
    floors: list[dict[str, float]] = []
    traces: dict[str, list[tuple[float, float]]] = {}
    checks: dict[str, list[CrossCheck]] = {w.name: [] for w in workloads}
    expected = {w.name: expected_view(w, args.seed) for w in workloads}
    try:
        for run in range(args.runs):
            results: RunResults = {}
            with tempfile.TemporaryDirectory(prefix="compactlog-bench-", dir=args.workdir) as t:
                tmp = Path(t)
                bar.label(f"run {run + 1}: floors")
                floors.append(measure_floors(tmp, workloads[0]))
                bar.advance()
                for wl in workloads:
                    results[wl.name], views = {}, {}
                    for kind in STRATEGIES:
                        prefix = f"run {run + 1}: {wl.name} {kind}"
                        workdir = tmp / f"{wl.name}-{kind}"
                        workdir.mkdir()
                        res = run_strategy(kind, wl, args.seed, workdir, args.durability,
                                           unary, step=bar.labeller(prefix))  # fmt: skip
                        shutil.rmtree(workdir, ignore_errors=True)
                        results[wl.name][kind] = res.metrics
                        views[kind] = res.view
                        if run == 0 and wl is workloads[0]:
                            traces[kind] = res.trace
                        bar.advance()
                    checks[wl.name].append(compare_views(views, expected[wl.name]))
            runs.append(results)
    finally:
        bar.finish()
    return runs, floors, traces, checks


def _write_report(
    out: Path,
    report: dict[str, Any],
    traces: dict[str, list[tuple[float, float]]],
    first: Workload,
) -> int:
    """report.json, report.md with the plots and the targets table; the table printed.
    Exit ``EXIT_CROSS_CHECK`` when the strategies left different views."""
    report["plots"] = plots.write_all(out, report["results"], traces, first.name)
    rows = targets(report["results"], report["floors"], first)
    report["targets"] = [dataclasses.asdict(r) for r in rows]
    table = targets_markdown(rows)
    write_json(out / "report.json", report)
    write_markdown(out / "report.md", report, "\n\n" + table)
    print(table)
    print(f"\nreport: {out / 'report.md'} (JSON: {out / 'report.json'})")
    failed = [name for name, c in report["cross_check"].items() if not c["identical"]]
    if failed:
        sys.stderr.write(
            f"compactlog bench: CROSS-CHECK FAILED: the strategies left different "
            f"latest-value-per-key views for {', '.join(failed)} (details in report.json)\n"
        )
        return EXIT_CROSS_CHECK
    return 0


def build_report(
    args: argparse.Namespace,
    argv: list[str],
    workloads: list[Workload],
    runs: list[RunResults],
    floors: list[dict[str, float]],
    traces: dict[str, list[tuple[float, float]]],
    checks: dict[str, list[CrossCheck]],
    started: dt.datetime,
) -> dict[str, Any]:
    """Everything the JSON holds; the Markdown and the plots are drawn from it."""
    cross: dict[str, Any] = {}
    for name, per_run in checks.items():
        worst = next((c for c in per_run if not c.identical), per_run[0])
        cross[name] = {**dataclasses.asdict(worst), "identical": all(c.identical for c in per_run)}
    return {
        "suite": "compactlog bench",
        "schema": 1,
        "profile": args.profile,
        "runs": args.runs,
        "seed": args.seed,
        "durability": args.durability,
        "started": started.isoformat(timespec="seconds"),
        "command": " ".join(["compactlog bench", *argv]),
        "machine": machine(),
        "versions": versions(),
        "strategies": STRATEGIES,
        "workloads": [{**dataclasses.asdict(w), "record_bytes": w.record_bytes} for w in workloads],
        "floors": aggregate_floors(floors),
        "results": aggregate_runs(runs),
        "cross_check": cross,
        "latency_trace": {"workload": workloads[0].name, "traces": traces},
    }
