"""The commit-message rule (scripts/check_commits.py): subjects of at most 72 characters in
the imperative, a blank line before the body; checked on messages, on a real repository's
history after the rule's base, and through the commit-msg hook git runs."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_commits", ROOT / "scripts/check_commits.py")
assert _spec is not None and _spec.loader is not None
check_commits = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_commits)


@pytest.mark.parametrize(
    "message",
    [
        "Check short writes in segment appends",
        "Check short writes in segment appends\n\nThe why, with figures.\n",
        "bench: Add the group-commit floor",
        "Speed up the offset map's probe",
        "A" + "b" * 71,
        'Revert "Add a thing"\n\nThis reverts commit abc.',
    ],
)
def test_good_messages_pass(message: str) -> None:
    assert check_commits.problems(message) == []


@pytest.mark.parametrize(
    ("message", "says"),
    [
        ("A" + "b" * 72, "73 characters"),
        ("Check short writes.", "period"),
        ("check short writes", "not capitalised"),
        ("Added short-write checks", "past tense"),
        ("Fixing the short writes", "gerund"),
        ("storage: Fixed short writes", "past tense"),
        ("Check short writes\nbody right under it", "blank line"),
        ("", "empty"),
    ],
)
def test_bad_messages_say_why(message: str, says: str) -> None:
    found = check_commits.problems(message)
    assert any(says in problem for problem in found), found


ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
}


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, env=ENV, capture_output=True, text=True)


def _repo(tmp_path: Path) -> Path:
    """A repository holding the real script and hook, the hook installed as scripts/test
    installs it."""
    (tmp_path / "scripts/hooks").mkdir(parents=True)
    for name in ("check_commits.py", "hooks/commit-msg"):
        (tmp_path / "scripts" / name).write_bytes((ROOT / "scripts" / name).read_bytes())
    (tmp_path / "scripts/hooks/commit-msg").chmod(0o755)
    assert _git(tmp_path, "init", "-q").returncode == 0
    return tmp_path


def test_history_after_the_base_is_checked(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    assert _git(repo, "commit", "-q", "--allow-empty", "-m", "an old subject " * 8).returncode == 0
    base = _git(repo, "rev-parse", "HEAD").stdout.strip()
    assert _git(repo, "commit", "-q", "--allow-empty", "-m", "Add a good one").returncode == 0
    check = [sys.executable, "scripts/check_commits.py", "--since", base]

    ok = subprocess.run(check, cwd=repo, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "1 commits after the rule, 0 problems" in ok.stdout
    assert _git(repo, "commit", "-q", "--allow-empty", "-m", "Fixed everything.").returncode == 0
    bad = subprocess.run(check, cwd=repo, capture_output=True, text=True)
    assert bad.returncode == 1
    assert "past tense" in bad.stderr and "period" in bad.stderr


def test_the_hook_refuses_a_bad_message(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / ".git/hooks/commit-msg").symlink_to("../../scripts/hooks/commit-msg")
    refused = _git(repo, "commit", "--allow-empty", "-m", "Fixing a thing")
    assert refused.returncode != 0
    assert "gerund" in refused.stderr
    assert _git(repo, "commit", "--allow-empty", "-m", "Fix a thing").returncode == 0
    assert _git(repo, "log", "--format=%s").stdout == "Fix a thing\n"


def test_a_clone_without_the_base_checks_nothing(tmp_path: Path) -> None:
    """A shallow clone may hold commits from before the rule; without the base commit
    which came after cannot be told, so nothing is checked (and the gate passes)."""
    repo = _repo(tmp_path)
    assert _git(repo, "commit", "-q", "--allow-empty", "-m", "an old subject " * 8).returncode == 0
    check = [sys.executable, "scripts/check_commits.py", "--since", "0" * 40]
    done = subprocess.run(check, cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0 and "nothing checked" in done.stdout
