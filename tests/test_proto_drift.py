"""The committed protobuf/gRPC modules must be what proto/ generates today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GENERATED = REPO / "compactlog" / "v1"


def test_generated_modules_match_proto(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_proto.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert fresh, "protoc generated nothing"
    stale = [
        str(rel) for rel in fresh if (tmp_path / rel).read_bytes() != (REPO / rel).read_bytes()
    ]
    assert not stale, f"stale generated modules, run scripts/gen_proto.py: {stale}"
    committed = sorted(p.relative_to(REPO) for p in GENERATED.glob("compactlog_pb2*"))
    assert committed == [rel for rel in fresh if rel.parent == Path("compactlog/v1")]
