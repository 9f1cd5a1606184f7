"""Test-only crash points: the process exits 137 at a named step, as kill -9 leaves it.

The crash-safety tests kill a real server at each step of a change by naming the step in
an environment variable: ``COMPACTLOG_FRONT_CRASH_AT`` (the front's spanning publishes and
spread admin calls, ``server.front.spanning``) and ``COMPACTLOG_ADMIN_CRASH_AT`` (a
store's own admin changes: partitioned topics in ``server.admin.partitioned_topics``, the
topic stores' create and delete in ``storage``). ``crash`` is the one way out for all of
them; here, below every layer, so that each can reach it. Unset, a point costs a lookup.
"""

from __future__ import annotations

import os
import sys

ADMIN_ENV = "COMPACTLOG_ADMIN_CRASH_AT"
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
    if os.environ.get(env) == point:
        crash(point)
