"""Test-only crash points: the process exits 137 at a named step, as kill -9 leaves it.

The crash-safety tests kill a real server at each step of a change by naming the step in
an environment variable: ``COMPACTLOG_FRONT_CRASH_AT`` (the front's spanning publishes and
spread admin calls, ``server.front.spanning``) and ``COMPACTLOG_ADMIN_CRASH_AT`` (a
store's own admin changes: partitioned topics in ``server.admin.partitioned_topics``, the
topic stores' create and delete in ``storage``). ``crash`` is the one way out for all of
them; here, below every layer, so that each can reach it. Unset, a point costs a lookup.
With ``COMPACTLOG_CRASH_ONCE`` naming a file, a point exits only in the process that
creates that file first: a shard restarted with the same environment, or another shard,
goes past it (one shard killed while the server lives on).
"""

from __future__ import annotations

import os
import sys

ADMIN_ENV = "COMPACTLOG_ADMIN_CRASH_AT"
ONCE_ENV = "COMPACTLOG_CRASH_ONCE"
# The steps of the admin changes (docs/operations.md, "After a crash in an admin change").
ADMIN_POINTS = (
    "create_after_intent",
    "create_after_first_partition",
    "create_before_record",
    "grow_after_intent",
    "grow_after_first_partition",
    "grow_before_record",
    "delete_after_intent",
    "delete_after_first_partition",
    "delete_before_record",
    "ledger_create_before_catalog",
    "ledger_delete_after_catalog",
    "segmented_create_before_rename",
    "segmented_delete_after_rename",
)


def crash(point: str) -> None:
    print(f"compactlog: crash injected at {point} (pid {os.getpid()})", file=sys.stderr, flush=True)
    os._exit(137)


def reached(point: str, env: str = ADMIN_ENV) -> None:
    """Exit here when ``env`` names ``point`` (tests only)."""
    if os.environ.get(env) == point and _first_here():
        crash(point)


def _first_here() -> bool:
    """No ``ONCE_ENV``, or this process created its file first."""
    once = os.environ.get(ONCE_ENV)
    if not once:
        return True
    try:
        os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True
