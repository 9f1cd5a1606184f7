"""The truncation and deletion matrix (CONTRACT section 11, issue 27): every kind of file
the server writes, cut to nothing, to half, by its last byte, and deleted while the server
is stopped; then a real server starts on the damaged copy and everything is read through it.

Damage that removes data must be seen like damage that changes it: each case ends
correct, data_loss, offline or refused (``damage.py``), never with a shorter answer and OK
or a topic gone. The quick variant cuts the file kinds where a loss is most likely to go
unseen (RocksDB's SST, WAL, MANIFEST and CURRENT, the catalog, a sealed segment, the
cursors); the ``slow`` one cuts every file of the template every way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .damage import SEG, Template, run_matrix, sealed_segments, stored_files

HOW = ("zero", "half", "byte", "delete")


@dataclass(frozen=True)
class Cut:
    kind: str  # what kind of file
    rel: str  # the file, relative to the data dir
    how: str  # one of HOW

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.rel}:{self.how}"

    def apply(self, data: Path) -> None:
        path = data / self.rel
        if self.how == "delete":
            path.unlink()
            return
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            fh.truncate({"zero": 0, "half": size // 2, "byte": size - 1}[self.how])


def every_cut(data: Path) -> list[Cut]:
    """Each file every way; an empty file can only be deleted."""
    return [
        Cut(kind, rel, how)
        for kind, rel, size in stored_files(data, every=True)
        for how in (HOW if size else ("delete",))
    ]


def quick_cuts(data: Path) -> list[Cut]:
    """The cuts most likely to lose data without a word: RocksDB's files, the cursors
    journal, the active segment emptied, a sealed one halved and emptied."""
    largest: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for kind, rel, size in stored_files(data, every=True):
        if size >= sizes.get(kind, -1):
            largest[kind], sizes[kind] = rel, size
    picks = [("sst", "delete"), ("wal", "delete"), ("manifest", "half"), ("CURRENT", "delete")]
    cuts = [Cut(kind, largest[kind], how) for kind, how in [*picks, ("cursors.journal", "byte")]]
    active = sorted((data / "segments" / SEG).glob("*.log"))[-1]
    cuts.append(Cut("segment", active.relative_to(data).as_posix(), "zero"))
    sealed = max(sealed_segments(data), key=lambda p: p.stat().st_size)
    cuts += [Cut("segment", sealed.relative_to(data).as_posix(), how) for how in ("half", "zero")]
    return cuts


def test_truncation_matrix_quick(
    damage_template: Template, tmp_path: Path, server_class: Any, capsys: Any
) -> None:
    cuts = quick_cuts(damage_template[0])
    run_matrix("truncation matrix", damage_template, cuts, tmp_path, server_class, capsys)


@pytest.mark.slow
def test_truncation_matrix_every_file_kind(
    damage_template: Template, tmp_path: Path, server_class: Any, capsys: Any
) -> None:
    cuts = every_cut(damage_template[0])
    run_matrix("truncation matrix", damage_template, cuts, tmp_path, server_class, capsys)
