"""``benchmarks/bench_guard.py`` runs end to end and prints a row for every server and call."""

from __future__ import annotations

import pytest

from compactlog.bench import bench_guard


def test_a_tiny_run_prints_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_guard.main(["--rounds", "1", "--calls", "5", "--principals", "3"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert {(r[0], r[1]) for r in rows} == {
        (server, call)
        for server in ("plain", "tokens", "tokens+tls")
        for call in ("Publish", "GetTopic")
    }
    assert all(float(r[2]) > 0 and float(r[3]) > 0 for r in rows)
