"""What every ``compactlog bench`` report shares: statistics, number formatting, the
figure/goal/floor table, and the machine the figures were taken on.

Kept free of storage and server imports, so a suite that talks to the server only over
gRPC (``dataplane``) keeps working while those internals change.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.metadata
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGES = ("compactlog", "rocksdict", "grpcio", "protobuf", "numpy", "matplotlib")


def aggregate(samples: Sequence[float]) -> dict[str, Any]:
    """Median, min, max and the samples themselves."""
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "samples": list(samples),
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The sample at rank ``q`` (nearest rank, no interpolation: a p99 is a real call)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def num(value: float) -> str:
    """Thousands separators for big figures, at least two significant digits for small ones.

    Below 0.1 the places grow with the value's order of magnitude, so a floor of 0.0095 s
    prints as 0.00950, not 0.009 (a ratio computed from the printed figures stays close to
    the printed ratio).
    """
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 0.1 or size == 0:
        return f"{value:.2f}"
    places = min(12, 2 - math.floor(math.log10(size)))
    return f"{value:.{places}f}"


@dataclass(frozen=True)
class Target:
    """One row of a targets table: a figure, its target, its floor and their ratio."""

    name: str
    strategy: str
    figure: float
    unit: str
    target: str
    meets: bool | None
    floor: float
    floor_name: str
    ratio: float
    ratio_meaning: str


def targets_markdown(rows: Sequence[Target], first_header: str = "target (issue)") -> str:
    """The rows as a Markdown table: figure, target, meets, floor, figure vs floor."""
    lines = [
        f"| {first_header} | strategy | figure | target | meets | floor | vs floor |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        meets = "n/a" if r.meets is None else ("yes" if r.meets else "**no**")
        unit_floor = "s" if r.ratio_meaning.startswith("time") else r.unit
        lines.append(
            f"| {r.name} | {r.strategy.upper()} | {num(r.figure)} {r.unit} | {r.target} | "
            f"{meets} | {num(r.floor)} {unit_floor} ({r.floor_name}) | "
            f"{num(r.ratio)} ({r.ratio_meaning}) |"
        )
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    """CPU model, cores, memory and platform: figures only mean something beside these."""
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if "model name" in ln), "")
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu_model": model or platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "memory_gb": mem / 1e9,
        "platform": platform.platform(),
    }


def versions() -> dict[str, str]:
    """Python and the packages whose speed the figures depend on."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def envelope(
    suite: str, settings: Any, started: dt.datetime, t0: float, **figures: Any
) -> dict[str, Any]:
    """The JSON report every ``compactlog bench`` suite writes: what ran (``settings``, a
    dataclass with a ``workdir``), when, how long (from ``perf_counter`` ``t0``), on which
    machine and packages, then the suite's own ``figures``."""
    return {
        "suite": suite,
        "schema": 1,
        "settings": {**dataclasses.asdict(settings), "workdir": str(settings.workdir or "")},
        "started": started.isoformat(timespec="seconds"),
        "duration_s": time.perf_counter() - t0,
        "machine": machine(),
        "versions": versions(),
        **figures,
    }


def medians(aggs: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """metric -> its median, from ``aggregate``'s output."""
    return {key: float(agg["median"]) for key, agg in aggs.items()}


def ratio_spread(results: Mapping[str, Mapping[str, Any]], digits: int = 2) -> str:
    """ "key min-max; ..." over the per-run samples of every ``*ratio`` result: the line
    under a suite's table that says how far its runs agreed."""
    return "; ".join(
        f"{key} {min(agg['samples']):.{digits}f}-{max(agg['samples']):.{digits}f}"
        for key, agg in results.items()
        if key.endswith("ratio")
    )


def print_report(
    command: str,
    argv: Sequence[str],
    report: dict[str, Any],
    markdown: Callable[[dict[str, Any]], str],
    json_path: Path | None,
) -> None:
    """Print a suite's Markdown and, when asked, write its JSON record (every sample):
    what every ``compactlog bench`` suite ends with."""
    report["command"] = " ".join([command, *argv])
    print(markdown(report))
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nJSON: {json_path}")
