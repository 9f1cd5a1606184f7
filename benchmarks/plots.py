"""PNG plots of a bench report (matplotlib, Agg backend: no display needed).

- ``throughput.png``: publish, raw read and compaction rates per workload, both strategies;
- ``space.png``: bytes on disk before and after compaction per workload, both strategies;
- ``latency.png``: unary Publish latency while the first workload is compacted, over time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from compactlog.bench.strategy import STRATEGIES

COLOURS = {"ledger": "#1f77b4", "segmented": "#ff7f0e"}
Trace = Sequence[Sequence[float]]


def _tick(value: float, _pos: int) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:g}"


def _grouped(ax: Any, workloads: Sequence[str], values: Mapping[str, Sequence[float]]) -> None:
    width = 0.8 / len(values)
    for i, (kind, vals) in enumerate(values.items()):
        xs = [x + (i - (len(values) - 1) / 2) * width for x in range(len(workloads))]
        ax.bar(xs, vals, width, label=STRATEGIES[kind], color=COLOURS[kind])
    ax.set_xticks(range(len(workloads)), workloads, rotation=15, fontsize=8)
    ax.yaxis.set_major_formatter(FuncFormatter(_tick))
    ax.grid(axis="y", alpha=0.3)


def _legend_below(fig: Any, ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))


def _medians(results: Mapping[str, Any], key: str, scale: float = 1.0) -> dict[str, list[float]]:
    kinds = next(iter(results.values())).keys()
    return {k: [results[w][k][key]["median"] / scale for w in results] for k in kinds}


def throughput(path: Path, results: Mapping[str, Any]) -> None:
    names = list(results)
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, (key, title) in zip(
        axes,
        (
            ("publish_rps", "publish (records/s)"),
            ("raw_read_rps", "raw read (messages/s)"),
            ("compaction_rps", "compaction / cleaning (records/s)"),
        ),
        strict=True,
    ):
        _grouped(ax, names, _medians(results, key))
        ax.set_title(title, fontsize=10)
    fig.suptitle("Throughput, median of the runs", fontsize=11)
    _legend_below(fig, axes[0])
    fig.savefig(path, dpi=80)
    plt.close(fig)


def space(path: Path, results: Mapping[str, Any]) -> None:
    names = list(results)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, (key, title) in zip(
        axes,
        (("disk_before_bytes", "before compaction"), ("disk_after_bytes", "after compaction")),
        strict=True,
    ):
        _grouped(ax, names, _medians(results, key, 1e6))
        ax.set_title(f"bytes on disk {title} (MB)", fontsize=10)
    _legend_below(fig, axes[0])
    fig.savefig(path, dpi=80)
    plt.close(fig)


def latency(
    path: Path, traces: Mapping[str, Trace], ends: Mapping[str, float], workload: str
) -> None:
    """Each probe call's latency at its start time; a dashed line where Compact returned."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for kind, trace in traces.items():
        if trace:
            ax.plot([t for t, _ in trace], [ms for _, ms in trace], marker=".", linewidth=0.8,
                    label=STRATEGIES[kind], color=COLOURS[kind])  # fmt: skip
        if kind in ends:
            ax.axvline(ends[kind], color=COLOURS[kind], linestyle="--", linewidth=0.8)
    ax.set_xlabel("seconds since Compact was sent")
    ax.set_ylabel("unary Publish latency (ms)")
    ax.set_yscale("log")
    ax.set_title(f"Produce latency during compaction ({workload}, first run)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def write_all(
    out: Path, results: Mapping[str, Any], traces: Mapping[str, Trace], workload: str
) -> list[str]:
    """Write the three plots into ``out``; returns their file names."""
    throughput(out / "throughput.png", results)
    space(out / "space.png", results)
    ends = {kind: results[workload][kind]["compaction_s"]["samples"][0] for kind in traces}
    latency(out / "latency.png", traces, ends, workload)
    return ["throughput.png", "space.png", "latency.png"]
