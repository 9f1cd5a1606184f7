"""docs/ecosystem.md, the Pulsar/Kafka/Spark equivalence table, names tests that exist and
marks nothing missing: each row is shown by a test or said to be in progress on a branch."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "ecosystem.md"
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


def rows() -> list[list[str]]:
    """The body rows of every table: cells without the outer pipes."""
    out = []
    for line in DOC.read_text().splitlines():
        if not line.startswith("| ") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if cells[-1] != "shown by":
            out.append(cells)
    return out


def test_every_row_is_shown_or_in_progress() -> None:
    table = rows()
    assert len(table) >= 40
    for cells in table:
        assert len(cells) == 3, cells
        shown = cells[2]
        assert TEST_REF.search(shown) or shown.startswith("in progress ("), cells
        assert "in progress" not in shown or "branch" in shown or "planned" in shown, cells
        assert "missing" not in " ".join(cells).lower(), cells


def test_every_named_test_exists() -> None:
    absent = []
    for path, name in TEST_REF.findall(DOC.read_text()):
        source = REPO / path
        if not source.exists() or not re.search(rf"^\s*def {name}\(", source.read_text(), re.M):
            absent.append(f"{path}::{name}")
    assert not absent, f"docs/ecosystem.md names tests that do not exist: {absent}"
