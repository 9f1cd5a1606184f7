"""``benchmarks/publish_profile.py`` runs: a tiny publish at a real server and at the
group-commit floor with a stand-in tool (``sleep``, ended by the SIGINT a profiler ends
on). What it prints is checked, never how fast."""

from __future__ import annotations

import pytest

from compactlog.bench import publish_profile


@pytest.mark.parametrize("target", ["server", "floor"])
def test_it_publishes_with_the_tool_attached(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [target, "--streams", "2", "--records", "2000", "--attach-s", "0", "--", "sleep", "30"]
    assert publish_profile.main(argv) == 0
    out = capsys.readouterr().out
    assert f"{target} dataplane-0: " in out and f"{target} dataplane-1: " in out
    assert "publish window" in out


def test_without_a_tool_it_says_so() -> None:
    with pytest.raises(SystemExit):
        publish_profile.main(["server", "--streams", "1"])
