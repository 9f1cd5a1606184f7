"""``compactlog bench as-of``: a tiny run prints every row with its ratio."""

from __future__ import annotations

import pytest

from compactlog.bench import cli as bench_cli


def test_a_tiny_run_prints_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["as-of", "--messages", "3000", "--keys", "300", "--batch", "100", "--runs", "1"]
    assert bench_cli.main(argv) == 0
    out = capsys.readouterr().out
    for row in ("before the horizon", "at the horizon", "past the horizon"):
        assert row in out
    assert out.count("(target <=") == 3
    # issue 29's floor past the horizon: compacted read + a fresh phase one of the tail
    assert "fresh phase one of the tail" in out
    assert "as_of / floor (goal <= 1.2)" in out


def test_the_cpu_clock_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["as-of", "--messages", "600", "--keys", "60", "--batch", "100", "--runs", "1"]
    assert bench_cli.main([*argv, "--clock", "cpu"]) == 0
    assert "as_of / floor (goal <= 1.2)" in capsys.readouterr().out
