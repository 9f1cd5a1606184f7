"""``compactlog bench dataplane``: the data plane beside a bare gRPC floor, same run.

compactlog's figures only mean something next to what grpcio and RocksDB do alone on
the same machine at the same moment, so each run measures both, on both topic kinds:

1. PublishStream of 1000 x 100 B records per request, pipelined, default (fsync)
   durability, beside two floors, each a bare grpcio server (``dataplane_floor``, its
   own process): the fair one, group commit (an intake thread writes each request's
   bytes unsynced, the replying side fsyncs the WAL once for all written so far, then
   answers them), as the server keeps the promise; and the old one, each request's
   bytes as one synced RocksDB put (one fsync a request). Goal: >= 0.6 x the fair
   floor (issue 29); the old floor is shown for comparison only. The goal's figure is
   published into a topic of the default config, as the floors write (no segment roll);
   SEGMENTED then publishes again into the ~20 small segments its cleaner pass needs,
   a row of its own: what a roll costs stays in sight.
2. Raw Read, and compacted Read after ``Compact(wait=true)``, of the whole topic; floor:
   the bare server streaming the very responses the real server sent, from memory.
   Goals: raw >= 0.8 x floor, compacted >= 0.6 x floor. The ``Compact(wait=true)``
   itself (LEDGER: a two-phase run; SEGMENTED: a cleaner pass), timed by the client,
   beside the raw Read of the same topic in the same run. Goal: <= 1.0 x that read.
3. Unary Publish of one record at idle, p50 and p99; floors: a unary raw-bytes echo,
   and a unary call that stores its bytes as one synced RocksDB put before answering
   (the WAL fsync an acknowledgement waits for at the default durability: on a disk
   whose fsync p99 is over 2 ms, the goal is below what the promise allows).
   Goal: p99 <= 2 ms (on a quiet box: the report prints the load average).
4. Server RSS growth while reading a large topic end to end; floor: the bare server's
   growth streaming the same responses from a file. Goal: < 100 MB.

The client code and request bytes are the same for the real server and the floor
(``rawlog``); only the public gRPC API is used, so the benchmark survives rewrites of
the server's internals. Rows 1-3 are medians of ``--runs`` runs; row 4 is one
measurement (a 100 MB topic by default, ``--memory-mb 1000`` for 1 GB).

    compactlog bench dataplane                      # about 1-2 minutes on 2 cores
    compactlog bench dataplane --quick              # seconds
    compactlog bench dataplane --runs 5 --kinds ledger --json dataplane.json
    python -m compactlog.bench.dataplane --quick    # the same, without the other suites
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compactlog.bench.dataplane_runs import (
    KINDS,
    QUICK,
    TOPIC,
    Sample,
    Settings,
    measure_memory,
    one_run,
    step,
)
from compactlog.bench.rawlog import publish_request
from compactlog.bench.summary import (
    Target,
    aggregate,
    envelope,
    medians,
    print_report,
    targets_markdown,
)
from compactlog.bench.workloads import batches

Goal = tuple[str, Callable[[float, float], bool | None]]


def at_least(share: float) -> Goal:
    """The goal of a figure at ``share`` of its floor or more."""
    return (f">= {share:g} x floor", lambda fig, floor: fig / floor >= share)


PUBLISH_GOAL, RAW_READ_GOAL, COMPACTED_READ_GOAL = at_least(0.6), at_least(0.8), at_least(0.6)
NO_GOAL: Goal = ("n/a", lambda _fig, _floor: None)
P99_GOAL: Goal = ("<= 2 ms", lambda fig, _floor: fig <= 2.0)
RSS_GOAL: Goal = ("< 100 MB", lambda fig, _floor: fig < 100.0)
ONE_READ: Goal = ("<= 1.0 x raw Read", lambda fig, floor: fig / floor <= 1.0)
COMPACTION = {"ledger": "two-phase run", "segmented": "cleaner pass"}
FROM_MEMORY = "bare gRPC streaming the same responses from memory"
GROUP_COMMIT = "bare gRPC, group commit: unsynced WAL writes, one fsync per group"
SYNCED_PUTS = "bare gRPC, one synced RocksDB put per request (no group commit)"
SYNCED_UNARY = "bare gRPC unary + one synced RocksDB put before the answer, p99"
ROLLING = "PublishStream, as above, into ~20 small segments (rolls)"  # SEGMENTED only
PUBLISH_FLOORS = {"floor.group_commit.publish_rps": "group-commit floor",
                  "floor.publish_rps": "synced-put floor"}  # fmt: skip


def rows(med: Sample, kinds: tuple[str, ...], memory_mb: float) -> list[Target]:
    """The table: for each kind, publish, reads, latency and memory beside their floors
    (a row whose figure was not measured, memory with ``--memory-mb 0``, is left out)."""
    out: list[Target] = []
    for k in kinds:
        specs: list[tuple[str, str, str, str, Goal, str]] = [
            ("PublishStream, 1000 x 100 B per request", f"{k}.publish_rps",
             "floor.group_commit.publish_rps", "records/s", PUBLISH_GOAL, GROUP_COMMIT),
            ("PublishStream, 1000 x 100 B per request", f"{k}.publish_rps",
             "floor.publish_rps", "records/s", NO_GOAL, SYNCED_PUTS),
            (ROLLING,
             f"{k}.publish_rolling_rps", "floor.group_commit.publish_rps", "records/s",
             NO_GOAL, GROUP_COMMIT),
            ("Read, raw, whole topic", f"{k}.raw_read_mps", f"floor.{k}.raw_read_mps",
             "messages/s", RAW_READ_GOAL, FROM_MEMORY),
            ("Read, compacted, whole topic", f"{k}.compacted_read_mps",
             f"floor.{k}.compacted_read_mps", "messages/s", COMPACTED_READ_GOAL, FROM_MEMORY),
            (f"{COMPACTION[k]}, Compact(wait=true), whole topic", f"{k}.compaction_s",
             f"{k}.raw_read_s", "s", ONE_READ, "one raw Read of the same topic, same run"),
            ("unary Publish of one record, p50, idle", f"{k}.unary.p50_ms",
             "floor.echo.p50_ms", "ms", NO_GOAL, "bare gRPC unary echo, p50"),
            ("unary Publish of one record, p99, idle", f"{k}.unary.p99_ms",
             "floor.echo.p99_ms", "ms", P99_GOAL, "bare gRPC unary echo, p99"),
            ("unary Publish of one record, p99, idle", f"{k}.unary.p99_ms",
             "floor.synced_unary.p99_ms", "ms", NO_GOAL, SYNCED_UNARY),
            (f"server RSS growth, Read of a {memory_mb:g} MB topic",
             f"{k}.read_rss_growth_mb", f"floor.{k}.read_rss_growth_mb", "MB", RSS_GOAL,
             "bare gRPC streaming the same responses from a file"),
        ]  # fmt: skip
        for name, key, floor_key, unit, (goal, meets), floor_name in specs:
            if key in med:
                fig, floor = med[key], med[floor_key]
                out.append(Target(name, k, fig, unit, goal, meets(fig, floor), floor,
                                  floor_name, fig / floor, "figure / floor"))  # fmt: skip
    return out


def aggregates(samples: list[Sample]) -> dict[str, dict[str, Any]]:
    return {key: aggregate([m[key] for m in samples]) for key in samples[0]}


def publish_ratios(samples: list[Sample], kinds: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Each run's publish figure over each publish floor of the same run, aggregated: the
    table's ratio is of medians, these show how much a ratio moved from run to run."""
    return {
        f"{k}.publish_rps/{floor}": aggregate([m[f"{k}.publish_rps"] / m[floor] for m in samples])
        for k in kinds
        for floor in PUBLISH_FLOORS
    }


def ratios_line(report: dict[str, Any]) -> str:
    """The per-run publish ratios, one phrase per kind and floor."""
    parts = []
    for key, agg in report["publish_ratios"].items():
        kind, floor = key.split(".publish_rps/")
        parts.append(
            f"{kind.upper()} / {PUBLISH_FLOORS[floor]} {agg['median']:.2f} "
            f"({agg['min']:.2f}-{agg['max']:.2f})"
        )
    return "Per-run PublishStream ratios, median (min-max): " + "; ".join(parts) + "."


def cpu_line(report: dict[str, Any]) -> str:
    """The CPU seconds of each kind's ``Compact`` (the server and its compaction workers)
    beside the server's over the raw Read of the same topic, medians: how far the run is
    from one Read in work done, which other processes' load stretches far less than the
    clock the goal's row reads (where the run's CPU is near its seconds, it waited on
    nothing else)."""
    res = report["results"]
    parts = []
    for k in report["settings"]["kinds"]:
        run, read = res[f"{k}.compaction_cpu_s"]["median"], res[f"{k}.raw_read_server_cpu_s"]
        ratio = f" = {run / read['median']:.2f}" if read["median"] > 0 else ""
        parts.append(
            f"{k.upper()} {run:.2f} s (its Compact took {res[f'{k}.compaction_s']['median']:.2f}"
            f" s) / {read['median']:.2f} s{ratio}"
        )
    return (
        "CPU of Compact (server and its workers) / server CPU of the raw Read, medians: "
        + "; ".join(parts)
        + "."
    )


def run(s: Settings) -> dict[str, Any]:
    """Every run, the memory measurement, and the report (JSON-ready)."""
    started, t0, load = dt.datetime.now(), time.perf_counter(), os.getloadavg()[0]
    requests = [publish_request(TOPIC, b) for b in batches(s.workload, s.seed)]
    samples = [one_run(s, i + 1, requests) for i in range(s.runs)]
    del requests
    memory: Sample = {}
    if s.memory_mb > 0:
        with tempfile.TemporaryDirectory(prefix="compactlog-dataplane-", dir=s.workdir) as t:
            for kind in s.kinds:
                step(f"memory: {kind}, a {s.memory_mb:g} MB topic")
                memory.update(measure_memory(kind, s, Path(t)))
    aggs = aggregates(samples)
    mem_aggs = aggregates([memory]) if memory else {}
    table = rows({**medians(aggs), **medians(mem_aggs)}, s.kinds, s.memory_mb)
    return envelope(
        "compactlog bench dataplane",
        s,
        started,
        t0,
        results=aggs,
        publish_ratios=publish_ratios(samples, s.kinds),
        memory=mem_aggs,
        rows=[dataclasses.asdict(r) for r in table],
        load_average=[load, os.getloadavg()[0]],
    )


def markdown(report: dict[str, Any]) -> str:
    """The table, with what it was measured on."""
    s, m = report["settings"], report["machine"]
    shares = {k: report["results"][f"{k}.publish_synced_share"]["median"] for k in s["kinds"]}
    synced = ", ".join(f"{k.upper()} publish replies synced: {v:.0%}" for k, v in shares.items())
    gc = {k: report["results"][f"floor.group_commit.{k}"]["median"] for k in ("requests", "syncs")}
    head = (
        f"{s['records']:,} records x 100 B, median of {s['runs']} run(s); memory: one "
        f"read of a {s['memory_mb']:g} MB topic ({s['memory_value_bytes']} B values). "
        f"{m['cpu_model']}, {m['cores']} cores. {synced}. Group-commit floor: "
        f"{gc['requests'] / gc['syncs']:.1f} requests per WAL fsync. Load average (1 min) "
        f"{report['load_average'][0]:.2f} at the start, {report['load_average'][1]:.2f} at "
        "the end."
    )
    rows_ = [Target(**r) for r in report["rows"]]
    table = targets_markdown(rows_, first_header="measure")
    return head + "\n\n" + table + "\n\n" + ratios_line(report) + "\n" + cpu_line(report)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compactlog bench dataplane",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes, one run: seconds")
    p.add_argument("--records", type=int, help="records published per run (default 200,000)")
    p.add_argument("--runs", type=int, help="runs to take the median over (default 3)")
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated topic kinds")
    p.add_argument("--unary", type=int, help="unary Publish calls timed (default 2000)")
    p.add_argument(
        "--memory-mb",
        type=float,
        help="topic read for the RSS figure (default 100; 1000 for 1 GB; 0 skips it)",
    )
    p.add_argument("--memory-value-bytes", type=int, help="value size of that topic (1000)")
    p.add_argument("--seed", type=int, help="workload seed (default 42)")
    p.add_argument("--workdir", type=Path, help="where data dirs go (default: system temp)")
    p.add_argument("--json", type=Path, help="also write the report as JSON here")
    return p


def settings_from(args: argparse.Namespace) -> Settings:
    """``Settings`` from the options, ``--quick`` filling what was not given."""
    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(Settings)
        if f.name != "kinds" and getattr(args, f.name, None) is not None
    }
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if not kinds or unknown:
        raise SystemExit(f"compactlog bench dataplane: --kinds takes {','.join(KINDS)}")
    s = Settings(**{**(QUICK if args.quick else {}), **given, "kinds": kinds})
    if s.records < 1 or s.runs < 1 or s.unary < 1 or s.memory_mb < 0:
        raise SystemExit("compactlog bench dataplane: sizes must be positive")
    return s


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    s = settings_from(args)
    if s.workdir is not None:
        s.workdir.mkdir(parents=True, exist_ok=True)
    report = run(s)
    print_report("compactlog bench dataplane", argv, report, markdown, args.json)
    return 0


if __name__ == "__main__":  # also runnable without the rest of the suite
    raise SystemExit(main(sys.argv[1:]))
