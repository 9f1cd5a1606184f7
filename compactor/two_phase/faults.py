"""Test-only fault injection for compaction runs, read from the environment.

``COMPACTLOG_CRASH_AT=<point>`` and ``COMPACTLOG_PAUSE_AT=<point>:<ms>`` crash the process
or pause a run there. The points are the compactor's steps (``FAULT_POINTS``, reached in
the compaction worker, or in the Spark engine's driver), the server's side of a worker's
commit (``COMMIT_FAULT_POINTS``) and a cleaning pass's steps (``CLEANER_FAULT_POINTS``,
in the worker). A crash is ``os._exit(137)`` unless the caller passes its own (a worker
kills itself with SIGKILL), so the crash-safety tests drive every process the same way:
each one dies at the points it reaches.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping

from compactlog.compactor.two_phase.compactor import FAULT_POINTS, FaultHook
from compactlog.errors import InvalidArgument

__all__ = ["CLEANER_FAULT_POINTS", "COMMIT_FAULT_POINTS", "fault_from_env"]

# The server, between ingesting a worker's SST file and committing the cursor.
COMMIT_FAULT_POINTS = ("after_ingest",)
# A cleaning pass in a worker: its offset map built; a .cleaned segment written, not swapped.
CLEANER_FAULT_POINTS = ("after_offset_map", "after_cleaned")
KNOWN_POINTS = (*FAULT_POINTS, *COMMIT_FAULT_POINTS, *CLEANER_FAULT_POINTS)


def _exit_137() -> None:
    os._exit(137)


def fault_from_env(
    environ: Mapping[str, str] | None = None, crash: Callable[[], None] = _exit_137
) -> FaultHook:
    """The fault hook the environment asks for (tests only); a no-op normally."""
    env = os.environ if environ is None else environ
    crash_at = env.get("COMPACTLOG_CRASH_AT", "")
    pause_at, _, pause_ms = env.get("COMPACTLOG_PAUSE_AT", "").partition(":")
    for point in (crash_at, pause_at):
        if point and point not in KNOWN_POINTS:
            raise InvalidArgument(
                f"unknown compaction fault point {point!r} ({', '.join(KNOWN_POINTS)})"
            )

    def fault(point: str) -> None:
        if point == pause_at:
            time.sleep(int(pause_ms or "1000") / 1000.0)
        if point == crash_at:
            print(
                f"compactlog: crash injected at {point} (pid {os.getpid()})",
                file=sys.stderr,
                flush=True,
            )
            crash()

    return fault
