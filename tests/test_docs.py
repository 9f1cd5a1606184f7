"""User-facing docs stay in step with the code they describe."""

from __future__ import annotations

from pathlib import Path

from compactlog.storage.config import LEDGER_KEYS, SEGMENTED_KEYS, SERVER_KEYS

REPO = Path(__file__).resolve().parent.parent


def test_every_config_key_is_documented() -> None:
    text = (REPO / "docs" / "configuration.md").read_text()
    missing = [
        k for t in (LEDGER_KEYS, SEGMENTED_KEYS, SERVER_KEYS) for k in t if f"`{k}`" not in text
    ]
    assert not missing, f"document these keys in docs/configuration.md: {missing}"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "\n./scripts/test\n" in readme
    assert ci.rstrip().endswith("\n./scripts/test")
