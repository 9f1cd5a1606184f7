"""Live compaction progress for ``compact --wait`` and ``compaction-status --wait``.

Driven by ``WatchCompaction`` updates. On a terminal (stderr) a ``rich`` progress bar shows
the phase, entries done of the phase's total, bytes read and written and the run's elapsed
time, redrawn in place and removed at the end; otherwise plain lines go to stderr, one per
phase and at most one every ``PLAIN_EVERY_S`` within a phase, so logs stay readable.
``rich`` is imported only when a bar is drawn.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any, Protocol

from compactlog.client.types import CompactionProgress

PLAIN_EVERY_S = 5.0


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"  # pragma: no cover


def figures(p: CompactionProgress) -> str:
    """``4,096/10,000 · 1.2 MB read · 0.4 MB written · 2.1 s``"""
    done = f"{p.done:,}/{p.total:,}" if p.total else f"{p.done:,}"
    return (
        f"{done} · {_size(p.bytes_read)} read · {_size(p.bytes_written)} written · "
        f"{p.elapsed_ms / 1000:.1f} s"
    )


def describe(p: CompactionProgress) -> str:
    """One update as a line: the phase, then its ``figures``."""
    return f"{p.phase or p.state.lower()} {figures(p)}"


class ProgressView(Protocol):
    def update(self, p: CompactionProgress) -> None: ...

    def close(self) -> None: ...


class PlainProgress:
    """Plain lines for logs and pipes."""

    def __init__(self, topic: str, stream: IO[str]) -> None:
        self.topic, self.stream = topic, stream
        self.phase = ""
        self.printed = 0.0

    def update(self, p: CompactionProgress) -> None:
        now = time.monotonic()
        if not p.running and not p.phase:
            return  # no run: the status that follows says it all
        if p.phase != self.phase or now - self.printed >= PLAIN_EVERY_S or not p.running:
            self.phase, self.printed = p.phase, now
            self.stream.write(f"compacting {self.topic}: {describe(p)} [{p.state}]\n")
            self.stream.flush()

    def close(self) -> None:
        pass


class RichProgress:
    """A rich progress bar on a terminal (transient: gone once the run ends)."""

    def __init__(self, topic: str, stream: IO[str]) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

        self.topic = topic
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[detail]}"),
            console=Console(file=stream),
            transient=True,
        )
        self.task = self.bar.add_task(f"compacting {topic}", total=None, detail="")
        self.bar.start()

    def update(self, p: CompactionProgress) -> None:
        fields: dict[str, Any] = {
            "description": f"{self.topic} {p.phase or p.state.lower()}",
            "completed": p.done,
            "total": p.total or None,
            "detail": figures(p),
        }
        self.bar.update(self.task, **fields)

    def close(self) -> None:
        self.bar.stop()


def progress_view(topic: str, stream: IO[str] | None = None) -> ProgressView:
    """A rich bar when ``stream`` (stderr) is a terminal, plain lines otherwise."""
    out = stream if stream is not None else sys.stderr
    return RichProgress(topic, out) if out.isatty() else PlainProgress(topic, out)
