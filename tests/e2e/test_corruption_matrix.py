"""The corruption matrix (CONTRACT section 11): flip bytes in every kind of file the server
writes, restart a real server on the damaged copy, read everything through it.

The template, the reads and the four outcomes (correct, data_loss, offline, refused; never
silent) are ``damage.py``'s. The quick variant samples one position in the most important
file kinds; the ``slow`` one flips many positions of every file kind.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .damage import Template, run_matrix, sealed_segments, stored_files


@dataclass(frozen=True)
class Case:
    kind: str  # what kind of file
    rel: str  # the file, relative to the data dir
    position: int
    mask: int = 0xFF
    setup: str = ""  # "" = flip in place; "swap", "swap-deleted", "cleaned": synthetic files

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.rel}@{self.position}^{self.mask:#04x}{self.setup}"

    def apply(self, data: Path) -> None:
        damage(data, self)


# ---- the cases -------------------------------------------------------------------------


def synthetic_cases(data: Path, rng: random.Random, per_kind: int) -> list[Case]:
    sealed = sealed_segments(data)
    out = []
    for setup in ("swap", "swap-deleted", "cleaned"):
        for seg in rng.sample(sealed, min(per_kind, len(sealed))):
            size = seg.stat().st_size
            rel = seg.relative_to(data).as_posix()
            out.append(Case(setup, rel, rng.randrange(size), 0xFF, setup))
    return out


def all_cases(data: Path, per_small: int, per_large: int, seed: int = 13) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for kind, rel, size in stored_files(data):
        k = per_large if kind in ("segment", "wal", "sst") else per_small
        for position in sorted(rng.sample(range(size), min(k, size))):
            cases.append(Case(kind, rel, position, rng.choice([0x01, 0x10, 0xFF])))
    return cases + synthetic_cases(data, rng, per_small)


def quick_cases(data: Path) -> list[Case]:
    """One flip in each of the file kinds where damage is most likely to go unseen."""
    rng = random.Random(7)
    files: dict[str, tuple[str, int]] = {}
    for kind, rel, size in stored_files(data):  # the largest file of each kind
        if size > files.get(kind, ("", 0))[1]:
            files[kind] = (rel, size)
    picks = []
    for kind in ("sst", "wal", "segment", "index", "cursors.json", "log-start-offset"):
        rel, size = files[kind]
        picks.append(Case(kind, rel, rng.randrange(size)))
    sealed = max(sealed_segments(data), key=lambda p: p.stat().st_size)
    rel = sealed.relative_to(data).as_posix()
    picks.append(Case("swap-deleted", rel, sealed.stat().st_size // 2, 0xFF, "swap-deleted"))
    return picks


def damage(data: Path, case: Case) -> None:
    path = data / case.rel
    if not case.setup:
        raw = bytearray(path.read_bytes())
        raw[case.position] ^= case.mask
        path.write_bytes(bytes(raw))
        return
    raw = bytearray(path.read_bytes())
    raw[case.position] ^= case.mask
    if case.setup == "cleaned":
        path.with_name(path.name + ".cleaned").write_bytes(bytes(raw))
        return
    if case.setup == "swap-deleted":  # a crash after the originals became .deleted
        for ext in (".log", ".index", ".timeindex"):
            original = path.with_suffix(ext)
            if original.exists():
                original.rename(original.with_name(original.name + ".deleted"))
    path.with_name(path.name + ".swap").write_bytes(bytes(raw))


def test_corruption_matrix_quick(
    damage_template: Template, tmp_path: Path, server_class: Any, capsys: Any
) -> None:
    run_matrix(
        "corruption matrix",
        damage_template,
        quick_cases(damage_template[0]),
        tmp_path,
        server_class,
        capsys,
    )


@pytest.mark.slow
def test_corruption_matrix_every_file_kind(
    damage_template: Template, tmp_path: Path, server_class: Any, capsys: Any
) -> None:
    cases = all_cases(damage_template[0], per_small=4, per_large=12)
    run_matrix("corruption matrix", damage_template, cases, tmp_path, server_class, capsys)
