"""The proto is lint-clean by buf's STANDARD rules, and self-contained.

buf.yaml skips only rules whose every finding is a name the contract fixes; each skip
carries its reason there. .ci/run installs buf (npm @bufbuild/buf), so CI runs the lint;
elsewhere the lint test skips when buf is missing."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO / "proto"


def test_buf_lint_is_clean(buf: str) -> None:
    lint = subprocess.run([buf, "lint"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert lint.returncode == 0, f"buf lint findings:\n{lint.stdout}{lint.stderr}"


def test_each_lint_exception_says_why() -> None:
    lines = (REPO / "buf.yaml").read_text().splitlines()
    start = lines.index("  except:") + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("    "))
    rules = [(i, lines[i]) for i in range(start, end) if lines[i].startswith("    - ")]
    assert rules, "buf.yaml lists no exceptions: drop this test"
    for i, rule in rules:
        above = lines[i - 1].strip()
        # a rule sits under its comment, or under the rule it shares the comment with
        assert above.startswith("#") or lines[i - 1].startswith("    - "), rule


def test_proto_refers_to_nothing_outside_the_repository() -> None:
    for path in PROTO_ROOT.rglob("*.proto"):
        text = path.read_text()
        for imported in re.findall(r'^import\s+(?:public\s+)?"([^"]+)";', text, re.M):
            inside = (PROTO_ROOT / imported).exists()
            assert inside or imported.startswith("google/protobuf/"), (path, imported)
        assert "../" not in text, f"{path} points outside proto/"
