"""``compactlog bench compaction-latency``: Publish latency while a compaction runs.

Issue 12 measured unary Publish p99 going from 2.4 ms idle to 48 ms during a two-phase
compaction and 99 ms during a LogCleaner pass, even of another topic: the runs held the
serving process. Now they run in worker processes; this suite measures what is left, per
design, each figure beside a floor from the same run:

1. Unary Publish p99 on a probe topic while one compaction of N messages (default 1M,
   ``--records 3000000`` for the issue's size) runs on another topic of the same kind;
   floor: the idle p99 of the same loop on the same server just before. Goal: <= 2x.
   Reported twice: the median of the runs' p99s, and the p99 of every run's calls pooled
   (a run gives a few hundred calls, so its own p99 is one of its slowest handful). The
   same, pooled, while a PreviewCompaction of the topic runs just before (it reads what
   the run reads, in a worker as the run does), and for LEDGER while a VerifyCompaction of
   the run's ledger runs just after.
2. LEDGER: phase two's MB/s (the run's input bytes over its phase-two time, in the
   worker); SEGMENTED: the LogCleaner pass's MB/s. Floor: a sequential file read of the
   topic's size in the same run. Goal: >= 0.25 x floor.
3. LEDGER: the whole two-phase run beside the two-phase RocksDB floor (two scans of the
   topic's batches and a write of the winners' share, ``floors.two_phase_floor``) on the
   same data. Goal: floor time / run time >= 1.0, as before the split.

Medians of ``--runs`` runs; every sample is in the JSON.

    compactlog bench compaction-latency                   # 1M messages, 3 runs
    compactlog bench compaction-latency --records 3000000 --runs 1
    compactlog bench compaction-latency --quick           # seconds
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

from compactlog.bench.compaction_latency_runs import (
    KINDS,
    QUICK,
    Calls,
    Sample,
    Settings,
    one_run,
)
from compactlog.bench.summary import (
    Target,
    aggregate,
    envelope,
    medians,
    percentile,
    print_report,
    targets_markdown,
)


def pooled(runs: list[Calls]) -> Sample:
    """p99 and count of every run's calls together, per ``<kind>.idle`` / ``.during``."""
    out: Sample = {}
    for key in runs[0]:
        values = [v for calls in runs for v in calls[key]]
        name = key.removesuffix("_ms")
        out[f"{name}_p99_ms"], out[f"{name}_calls"] = percentile(values, 0.99), len(values)
    return out


def rows(med: Sample, pool: Sample, kinds: tuple[str, ...], records: int) -> list[Target]:
    out: list[Target] = []
    for k in kinds:
        idle, during = med[f"{k}.idle_p99_ms"], med[f"{k}.during_p99_ms"]
        out.append(Target(
            f"unary Publish p99 during a compaction of {records:,} messages", k, during, "ms",
            "<= 2x idle p99", during <= 2 * idle, idle, "idle p99, same server, just before",
            during / idle, "figure / floor"))  # fmt: skip
        for during_what, label in (
            ("during", "the same, every run's {n:,} calls pooled"),
            ("preview", "... during a PreviewCompaction (dry run), {n:,} calls pooled"),
            ("verify", "... during a VerifyCompaction of the result, {n:,} calls pooled"),
        ):
            if f"{k}.{during_what}_p99_ms" in pool:  # SEGMENTED: no verification
                out.append(_pooled_row(pool, k, during_what, label))
        p50, idle50 = med[f"{k}.during_p50_ms"], med[f"{k}.idle_p50_ms"]
        out.append(Target(
            "unary Publish p50 during the compaction", k, p50, "ms", "n/a", None, idle50,
            "idle p50", p50 / idle50, "figure / floor"))  # fmt: skip
        name, key = (
            ("phase two (in a worker)", "ledger.phase_two_mbps")
            if k == "ledger"
            else ("LogCleaner pass (in a worker)", "segmented.compaction_mbps")
        )
        out += _throughput_rows(med, k, name, med[key])
        if k == "ledger":
            run_s, floor_s = med["ledger.compaction_s"], med["floor.two_phase_s"]
            out.append(Target(
                "TwoPhaseCompactor run (in a worker)", k, run_s, "s", "floor / time >= 1.0",
                floor_s / run_s >= 1.0, floor_s, "two-phase RocksDB floor", floor_s / run_s,
                "floor time / time"))  # fmt: skip
    return out


def _pooled_row(pool: Sample, k: str, during_what: str, label: str) -> Target:
    """p99 over every run's calls during ``during_what`` beside the pooled idle p99."""
    idle, fig = pool[f"{k}.idle_p99_ms"], pool[f"{k}.{during_what}_p99_ms"]
    n = int(pool[f"{k}.{during_what}_calls"])
    floor_name = "idle p99, every run's idle calls pooled"
    return Target(
        label.format(n=n),
        k,
        fig,
        "ms",
        "<= 2x idle p99",
        fig <= 2 * idle,
        idle,
        floor_name,
        fig / idle,
        "figure / floor",
    )


def _throughput_rows(med: Sample, k: str, name: str, fig: float) -> list[Target]:
    """A run's MB/s beside the sequential reads of its own files: warm (what the goal
    names: a page-cache read when the files are cached, which they are here), cold, and
    the raw copy loop; and the synthetic file read the suite always printed."""
    floors = [
        (f"{k}.floor_warm_read_mbps", "read of the same files (page cache)", ">= 0.25 x floor"),
        (f"{k}.floor_cold_read_mbps", "read of the same files, cold (fadvise DONTNEED)", "n/a"),
        (f"{k}.floor_copy_mbps", "copy loop of the same files (read + write + fsync)", "n/a"),
        ("floor.file_read_mbps", "sequential read of a new file (page cache)", "n/a"),
    ]
    out = []
    for key, floor_name, goal in floors:
        floor = med.get(key)
        if floor is None:
            continue
        met = fig / floor >= 0.25 if goal != "n/a" else None
        out.append(Target(name, k, fig, "MB/s", goal, met, floor, floor_name, fig / floor,
                          "figure / floor"))  # fmt: skip
    return out


def run(s: Settings) -> dict[str, Any]:
    started, t0 = dt.datetime.now(), time.perf_counter()
    runs = [one_run(s, i + 1) for i in range(s.runs)]
    samples = [m for m, _calls in runs]
    aggs = {key: aggregate([m[key] for m in samples]) for key in samples[0]}
    pool = pooled([calls for _m, calls in runs])
    table = rows(medians(aggs), pool, s.kinds, s.records)
    return envelope(
        "compactlog bench compaction-latency",
        s,
        started,
        t0,
        results=aggs,
        pooled=pool,
        rows=[dataclasses.asdict(r) for r in table],
    )


def markdown(report: dict[str, Any]) -> str:
    s, m, res = report["settings"], report["machine"], report["results"]
    calls = ", ".join(
        f"{k.upper()}: {res[f'{k}.during_calls']['median']:,.0f} calls during a "
        f"{res[f'{k}.compaction_s']['median']:.1f} s run"
        for k in s["kinds"]
    )
    head = (
        f"{s['records']:,} records x {100} B values, {s['keys']:,} keys; median of "
        f"{s['runs']} run(s). {m['cpu_model']}, {m['cores']} cores. {calls}."
    )
    return head + "\n\n" + targets_markdown([Target(**r) for r in report["rows"]], "measure")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compactlog bench compaction-latency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes, one run: seconds")
    p.add_argument("--records", type=int, help="messages compacted (default 1,000,000)")
    p.add_argument("--keys", type=int, help="distinct keys (default records / 10)")
    p.add_argument("--runs", type=int, help="runs to take the median over (default 3)")
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated topic kinds")
    p.add_argument("--idle-calls", type=int, help="unary Publish calls timed at idle (2000)")
    p.add_argument("--workdir", type=Path, help="where data dirs go (default: system temp)")
    p.add_argument("--json", type=Path, help="also write the report as JSON here")
    return p


def settings_from(args: argparse.Namespace) -> Settings:
    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(Settings)
        if f.name != "kinds" and getattr(args, f.name, None) is not None
    }
    if args.records is not None and args.keys is None:
        given["keys"] = max(1, args.records // 10)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    if not kinds or any(k not in KINDS for k in kinds):
        raise SystemExit(f"compactlog bench compaction-latency: --kinds takes {','.join(KINDS)}")
    s = Settings(**{**(QUICK if args.quick else {}), **given, "kinds": kinds})
    if min(s.records, s.keys, s.runs, s.idle_calls) < 1:
        raise SystemExit("compactlog bench compaction-latency: sizes must be positive")
    return s


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    s = settings_from(args)
    if s.workdir is not None:
        s.workdir.mkdir(parents=True, exist_ok=True)
    report = run(s)
    print_report("compactlog bench compaction-latency", argv, report, markdown, args.json)
    return 0


if __name__ == "__main__":  # also runnable without the rest of the suite
    raise SystemExit(main(sys.argv[1:]))
