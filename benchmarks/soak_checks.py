"""The invariants ``compactlog bench soak`` checks, as pure functions over what it recorded.

A soak run records, per topic, every publish the server acknowledged (id, key, value) and
every one that failed (in doubt: stored or not, the client cannot know); per
subscription, every delivery and every acknowledgement the server confirmed; and every
error status. After the run it reads the topics back. The checks:

- no acknowledged message lost: LEDGER keeps its raw history, so every acked id is read
  back with its key and value; a SEGMENTED compacted topic may have cleaned a record
  away, but only when a later record of its key exists (Kafka's guarantee);
- ids increase: in every read, in each producer's acked ids, in each delivery run;
- no duplicate delivery of an acked message: a message is never delivered again after
  the server confirmed its acknowledgement (restarts included);
- the compacted view is the latest value per key of the history read back (which holds
  every acked message, and in-doubt ones that were stored); it holds no invented value;
- every error a typed one: no UNKNOWN or INTERNAL status.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

Id = tuple[int, int]
Value = bytes | None  # None: a tombstone (LEDGER)
Stored = tuple[Id, bytes, Value]  # id, key, value as read back
UNTYPED = ("UNKNOWN", "INTERNAL")


@dataclass
class Check:
    name: str
    checked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def fail(self, problem: str) -> None:
        if len(self.problems) < 20:  # enough to see what went wrong
            self.problems.append(problem)
        else:
            self.problems[-1] = f"... and more ({problem})"


def increasing(name: str, runs: Iterable[Sequence[Id]]) -> Check:
    """Each sequence of ids strictly increases."""
    check = Check(name)
    for run in runs:
        for before, after in itertools.pairwise(run):
            check.checked += 1
            if not before < after:
                check.fail(f"{after} follows {before}")
    return check


def ledger_nothing_lost(acked: Iterable[Stored], log: Sequence[Stored]) -> Check:
    """Every acknowledged publish is read back, same id, key and value."""
    check = Check("no acked message lost (LEDGER raw log)")
    stored = {i: (k, v) for i, k, v in log}
    for msg_id, key, value in acked:
        check.checked += 1
        if stored.get(msg_id) != (key, value):
            check.fail(f"acked {msg_id} {key!r}={value!r} reads back as {stored.get(msg_id)}")
    return check


def segmented_nothing_lost(acked: Iterable[Stored], log: Sequence[Stored]) -> Check:
    """Every acknowledged record is read back, or a later record of its key is (cleaned)."""
    check = Check("no acked message lost (SEGMENTED, compacted)")
    stored = {i: (k, v) for i, k, v in log}
    last_of: dict[bytes, Id] = {}
    for msg_id, key, _v in log:
        last_of[key] = max(last_of.get(key, msg_id), msg_id)
    for msg_id, key, value in acked:
        check.checked += 1
        if msg_id in stored:
            if stored[msg_id] != (key, value):
                check.fail(f"acked {msg_id} {key!r}={value!r} reads back as {stored[msg_id]}")
        elif key not in last_of or last_of[key] <= msg_id:
            check.fail(f"acked {msg_id} {key!r}={value!r} is gone and nothing supersedes it")
    return check


def latest_per_key(log: Sequence[Stored]) -> list[Stored]:
    """What a compaction of ``log`` keeps: the last record of each key, unless it is a
    tombstone, in id order."""
    last: dict[bytes, Stored] = {}
    for record in log:
        last[record[1]] = record
    return sorted(r for r in last.values() if r[2] is not None)


def compacted_view(view: Sequence[Stored], log: Sequence[Stored], published: set[bytes]) -> Check:
    """The compacted view is the latest per key of the raw log, and invents nothing."""
    check = Check("compacted view == latest per key of the history")
    want = latest_per_key(log)
    check.checked = len(want)
    if list(view) != want:
        extra = sorted(set(view) - set(want))[:3]
        missing = sorted(set(want) - set(view))[:3]
        check.fail(f"view differs: extra {extra}, missing {missing}")
    for _i, key, value in view:
        if value is not None and value not in published:
            check.fail(f"{key!r}={value!r} was never published")
    return check


def no_acked_redelivered(name: str, deliveries: Iterable[tuple[Id, bool]]) -> Check:
    """``deliveries``: (id, whether its ack had been confirmed before this delivery)."""
    check = Check(name)
    for msg_id, acked_before in deliveries:
        check.checked += 1
        if acked_before:
            check.fail(f"{msg_id} delivered again after its acknowledgement was confirmed")
    return check


def every_acked_delivered(name: str, acked: Iterable[Id], delivered: set[Id]) -> Check:
    """A subscription drained at the end has seen every acknowledged publish."""
    check = Check(name)
    for msg_id in acked:
        check.checked += 1
        if msg_id not in delivered:
            check.fail(f"acked publish {msg_id} was never delivered")
    return check


def typed_errors(errors: dict[str, int]) -> Check:
    check = Check("every error a typed status (no UNKNOWN/INTERNAL)")
    check.checked = sum(errors.values())
    for code in UNTYPED:
        if errors.get(code):
            check.fail(f"{errors[code]} x {code}")
    return check
