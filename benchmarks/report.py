"""Medians, spreads, the targets table and the Markdown/JSON report of a ``compactlog bench`` run.

The JSON is the record (every sample of every run); the Markdown is for people and
shows medians with their min-max spread. The targets of issues 2, 3 and 4 read the first
workload of the profile (100 B values, one key per ten records), each beside its floor.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from compactlog.bench.strategy import STRATEGIES
from compactlog.bench.summary import Target, aggregate, num
from compactlog.bench.workloads import Workload

Metrics = dict[str, float]
RunResults = dict[str, dict[str, Metrics]]  # workload -> strategy -> metrics
MB = 1e6


def aggregate_runs(runs: Sequence[RunResults]) -> dict[str, dict[str, dict[str, Any]]]:
    """workload -> strategy -> metric -> aggregate over the runs."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for workload, by_kind in runs[0].items():
        out[workload] = {}
        for kind, metrics in by_kind.items():
            out[workload][kind] = {
                key: aggregate([run[workload][kind][key] for run in runs]) for key in metrics
            }
    return out


def aggregate_floors(floors: Sequence[Metrics]) -> dict[str, dict[str, Any]]:
    return {key: aggregate([f[key] for f in floors]) for key in floors[0]}


def cell(agg: Mapping[str, Any], scale: float = 1.0) -> str:
    """``median (min-max)``, or just the median for a single run."""
    med = num(agg["median"] / scale)
    if len(agg["samples"]) < 2:
        return med
    return f"{med} ({num(agg['min'] / scale)}-{num(agg['max'] / scale)})"


def targets(results: Mapping[str, Any], floors: Mapping[str, Any], wl: Workload) -> list[Target]:
    """The targets of issues 2 (foundation), 3 (TwoPhaseCompactor) and 4 (LogCleaner)."""
    led, seg = results[wl.name]["ledger"], results[wl.name]["segmented"]

    def med(agg: Mapping[str, Any], key: str) -> float:
        return float(agg[key]["median"])

    rb = wl.record_bytes
    f_write = med(floors, "file_write_bps") / rb  # records/s through a plain sequential file
    f_read = med(floors, "file_read_bps") / rb
    rows: list[Target] = []
    for kind, agg, pub_floor, pub_name, read_floor, read_name in (
        ("ledger", led, med(floors, "write_rps"), "raw RocksDB batched write",
         med(floors, "scan_rps"), "raw RocksDB scan"),
        ("segmented", seg, f_write, "sequential file write + fsync",
         f_read, "sequential file read"),
    ):  # fmt: skip
        pub, rd = med(agg, "publish_rps"), med(agg, "raw_read_rps")
        rows.append(Target("PublishStream, 1000 x 100 B per request", kind, pub, "records/s",
                           ">= 300,000", pub >= 300_000, pub_floor, pub_name,
                           pub / pub_floor, "figure / floor"))  # fmt: skip
        rows.append(Target("Read of the whole topic", kind, rd, "messages/s", ">= 300,000",
                           rd >= 300_000, read_floor, read_name, rd / read_floor,
                           "figure / floor"))  # fmt: skip
    for kind, agg, floor_key, floor_name in (
        ("ledger", led, "sync_write_p50_ms", "synced RocksDB write p50"),
        ("segmented", seg, "rpc_roundtrip_p50_ms", "gRPC round trip p50 (Health.Check)"),
    ):
        p50 = med(agg, "unary_idle_p50_ms")
        floor = med(floors, floor_key) if floor_key in floors else med(agg, floor_key)
        rows.append(Target("unary Publish of one record, p50", kind, p50, "ms", "<= 2 ms",
                           p50 <= 2.0, floor, floor_name, p50 / floor,
                           "figure / floor"))  # fmt: skip
    ratio = med(led, "compaction_floor_ratio")
    rows.append(Target("TwoPhaseCompactor (local engine)", "ledger",
                       med(led, "compaction_rps"), "records/s", "<= 2x floor time",
                       ratio <= 2.0, med(led, "two_phase_floor_s"),
                       "key scan + entry scan + winner write", ratio,
                       "time / floor time"))  # fmt: skip
    floor_s = med(seg, "compaction_bytes_in") / med(floors, "file_read_bps") + med(
        seg, "compaction_bytes_out"
    ) / med(floors, "file_write_bps")
    clean = med(seg, "compaction_rps")
    floor_rps = med(seg, "compaction_read") / floor_s
    rows.append(Target("LogCleaner pass", "segmented", clean, "records/s", ">= 300,000",
                       clean >= 300_000, floor_rps,
                       "sequential read of its input + write of its output", clean / floor_rps,
                       "figure / floor"))  # fmt: skip
    return rows


# (label, metric, scale, unit) of the per-workload comparison tables.
ROWS: tuple[tuple[str, str, float, str], ...] = (
    ("publish (PublishStream)", "publish_rps", 1, "records/s"),
    ("publish", "publish_mbps", 1, "MB/s"),
    ("raw read of everything", "raw_read_rps", 1, "messages/s"),
    ("compaction / cleaning, server time", "compaction_server_s", 1, "s"),
    ("compaction / cleaning", "compaction_rps", 1, "records/s"),
    ("compaction / cleaning", "compaction_mbps", 1, "MB/s"),
    ("bytes on disk before", "disk_before_bytes", MB, "MB"),
    ("bytes on disk after", "disk_after_bytes", MB, "MB"),
    ("space amplification before (disk / live)", "space_amp_before", 1, "x"),
    ("space amplification after", "space_amp_after", 1, "x"),
    ("written by compaction (run's bytes_out)", "compaction_bytes_out", MB, "MB"),
    ("written by compaction (process wchar)", "compaction_written_bytes", MB, "MB"),
    ("write amplification (publish + compaction wchar / payload)", "write_amp", 1, "x"),
    ("latest value of every key: raw read", "raw_read_s", 1, "s"),
    ("latest value of every key: raw read", "raw_read_bytes", MB, "MB"),
    ("latest value of every key: compacted read", "compacted_read_s", 1, "s"),
    ("latest value of every key: compacted read", "compacted_read_bytes", MB, "MB"),
    ("unary Publish p50, idle", "unary_idle_p50_ms", 1, "ms"),
    ("unary Publish p99, idle", "unary_idle_p99_ms", 1, "ms"),
    ("unary Publish p50, during compaction", "compaction_p50_ms", 1, "ms"),
    ("unary Publish p99, during compaction", "compaction_p99_ms", 1, "ms"),
    ("server RSS peak, publish", "rss_peak_publish_bytes", MB, "MB"),
    ("server RSS peak, compaction", "rss_peak_compaction_bytes", MB, "MB"),
)


def workload_markdown(name: str, by_kind: Mapping[str, Mapping[str, Any]]) -> str:
    heads = [STRATEGIES[k] for k in by_kind]
    lines = [f"| {name} | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for label, key, scale, unit in ROWS:
        cells = [cell(agg[key], scale) if key in agg else "n/a" for agg in by_kind.values()]
        lines.append(f"| {label} ({unit}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_json(path: Path, report: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")


def write_markdown(path: Path, report: Mapping[str, Any], summary: str) -> None:
    """The human report: summary first, then cross-check, per-workload tables, floors, setup."""
    m, v = report["machine"], report["versions"]
    check = report["cross_check"]
    ok = all(c["identical"] for c in check.values())
    parts = [
        f"# compactlog bench — profile `{report['profile']}`",
        f"{report['started']}, {report['runs']} run(s), seed {report['seed']}, "
        f"publish durability `{report['durability']}`. Figures are medians "
        "(min-max over the runs in brackets).",
        "## Targets (issues 2, 3, 4) beside their floors",
        f"Workload `{report['workloads'][0]['name']}`. " + summary,
        "## Cross-check",
        (
            "Both strategies left **identical** latest-value-per-key views, equal to the "
            "workload's own answer, in every workload and run."
            if ok
            else "**FAILED**: the strategies' latest-value-per-key views differ (see JSON)."
        ),
        "\n".join(
            [
                "| workload | keys | identical | view digest (SHA-256, first 16) |",
                "|---|---|---|---|",
                *(
                    f"| {name} | {c['keys']:,} | {'yes' if c['identical'] else '**no**'} | "
                    f"`{c['digests']['expected'][:16]}` |"
                    for name, c in check.items()
                ),
            ]
        ),
        "## Side by side, per workload",
    ]
    for wl in report["workloads"]:
        parts.append(f"### {wl['name']}")
        parts.append(_describe(wl))
        parts.append(workload_markdown(wl["name"], report["results"][wl["name"]]))
    parts.append("## Floors (same run)")
    parts.append("| floor | median (min-max) |\n|---|---|")
    for key, agg in report["floors"].items():
        parts[-1] += f"\n| {key} | {cell(agg)} |"
    parts.append("## Plots")
    parts.extend(f"![{p}]({p})" for p in report["plots"])
    parts.append("## Machine and versions")
    parts.append(
        f"{m['cpu_model']}, {m['cores']} cores, {m['memory_gb']:.1f} GB RAM, {m['platform']}. "
        + ", ".join(f"{k} {val}" for k, val in v.items())
        + "."
    )
    parts.append(f"Reproduce: `{report['command']}`")
    path.write_text("\n\n".join(parts) + "\n")


def _describe(wl: Mapping[str, Any]) -> str:
    extras = [
        f"{wl['tombstone_share']:.0%} tombstones" if wl["tombstone_share"] else "",
        f"{wl['keyless_share']:.0%} keyless" if wl["keyless_share"] else "",
    ]
    return (
        f"{wl['records']:,} records, {wl['value_bytes']:,} B values, {wl['keys']:,} keys "
        f"({wl['distribution']}, {wl['pattern']})" + "".join(f", {e}" for e in extras if e) + "."
    )
