"""``compactlog bench key-history`` runs end to end on a small topic and checks answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactlog.bench import key_history


@pytest.mark.slow
def test_key_history_bench_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "kh.json"
    argv = ["--messages", "3000", "--lookups", "5", "--segmented", "--workdir", str(tmp_path)]
    assert key_history.main([*argv, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {r["strategy"] for r in rows} == {"ledger", "segmented"}
    assert all(r["figure"] > 0 and r["floor"] > 0 for r in rows)
    assert "GetKeyHistory" in capsys.readouterr().out
