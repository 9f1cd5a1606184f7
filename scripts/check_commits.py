"""Check commit messages: a subject of at most 72 characters in the imperative, then a
blank line before the body (CONTRIBUTING.md, "Commits").

Run by ``scripts/test`` over the commits after ``RULE_SINCE`` (the history before the rule
stays as it was written) and by the ``commit-msg`` hook on a message file::

    python scripts/check_commits.py               # every commit in RULE_SINCE..HEAD
    python scripts/check_commits.py --since REV   # every commit in REV..HEAD
    python scripts/check_commits.py --file MSG    # one message (the commit-msg hook)

The imperative is checked the way a reviewer would spot its absence: the first word is
capitalised and is not a past tense or a gerund ("Added", "Fixing"). Merge and revert
subjects that git writes itself are accepted as they are.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

MAX_SUBJECT = 72
# The last commit before the rule: its history is not rewritten.
RULE_SINCE = "53219cedb850f941dae21926d46d059286c3f1c1"
# Imperative verbs that happen to end like a past tense or a gerund.
NOT_PAST = {"Embed", "Feed", "Need", "Proceed", "Seed", "Shed", "Speed", "Succeed", "Exceed"}
NOT_GERUND = {"Bring", "Ring", "String", "Sing", "Swing", "Sting", "Spring", "Wring"}


def problems(message: str) -> list[str]:
    """What is wrong with one commit message (empty when nothing is)."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    subject = lines[0].rstrip() if lines else ""
    if subject.startswith(("Merge ", 'Revert "', "fixup! ", "squash! ")):
        return []
    found: list[str] = []
    if not subject:
        return ["the subject is empty"]
    if len(subject) > MAX_SUBJECT:
        found.append(f"the subject has {len(subject)} characters, over {MAX_SUBJECT}")
    if subject.endswith("."):
        found.append("the subject ends with a period")
    words = subject.split()
    # "area: Do something" (Kafka's "KAFKA-NNNN: Fix ..."): the verb is the second word.
    first = words[1] if words[0].endswith(":") and len(words) > 1 else words[0]
    if first and not first[0].isupper():
        found.append(f"the subject's first word {first!r} is not capitalised")
    if first.endswith("ed") and first not in NOT_PAST:
        found.append(f"the subject's first word {first!r} is a past tense, not an imperative")
    if first.endswith("ing") and first not in NOT_GERUND:
        found.append(f"the subject's first word {first!r} is a gerund, not an imperative")
    if len(lines) > 1 and lines[1].strip():
        found.append("no blank line between the subject and the body")
    return found


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def commits_since(base: str) -> list[str] | None:
    """The commits after ``base`` on HEAD; None when ``base`` is not in this clone (a
    shallow clone: which of its commits came after the rule cannot be told)."""
    try:
        _git("cat-file", "-e", f"{base}^{{commit}}")
    except subprocess.CalledProcessError:
        return None
    return _git("rev-list", "--no-merges", f"{base}..HEAD").split()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, help="check one message file (commit-msg hook)")
    parser.add_argument("--since", default=RULE_SINCE, help="check the commits after this one")
    args = parser.parse_args(argv)
    if args.file is not None:
        found = problems(args.file.read_text())
        for problem in found:
            print(f"commit message: {problem}", file=sys.stderr)
        return 1 if found else 0
    try:
        commits = commits_since(args.since)
    except (OSError, subprocess.CalledProcessError):
        print("check_commits: not a git checkout, nothing to check")
        return 0
    if commits is None:
        print(f"check_commits: {args.since[:10]} is not in this (shallow) clone, nothing checked")
        return 0
    bad = 0
    for commit in commits:
        for problem in problems(_git("log", "-1", "--format=%B", commit)):
            print(f"{commit[:10]}: {problem}", file=sys.stderr)
            bad += 1
    print(f"check_commits: {len(commits)} commits after the rule, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
