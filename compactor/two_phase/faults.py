"""Test-only fault injection for compaction runs, read from the environment.

``COMPACTLOG_CRASH_AT=<point>`` and ``COMPACTLOG_PAUSE_AT=<point>:<ms>`` (points in
``FAULT_POINTS``) crash the process (exit 137) or pause a run there. The server's runs and
the Spark engine's driver both take their hook from here, so the crash-safety tests drive
either engine the same way.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping

from compactlog.compactor.two_phase.compactor import FAULT_POINTS, FaultHook
from compactlog.errors import InvalidArgument

__all__ = ["fault_from_env"]


def fault_from_env(environ: Mapping[str, str] | None = None) -> FaultHook:
    """The fault hook the environment asks for (tests only); a no-op normally."""
    env = os.environ if environ is None else environ
    crash_at = env.get("COMPACTLOG_CRASH_AT", "")
    pause_at, _, pause_ms = env.get("COMPACTLOG_PAUSE_AT", "").partition(":")
    for point in (crash_at, pause_at):
        if point and point not in FAULT_POINTS:
            raise InvalidArgument(
                f"unknown compaction fault point {point!r} ({', '.join(FAULT_POINTS)})"
            )

    def fault(point: str) -> None:
        if point == pause_at:
            time.sleep(int(pause_ms or "1000") / 1000.0)
        if point == crash_at:
            print(f"compactlog: crash injected at {point}", file=sys.stderr, flush=True)
            os._exit(137)

    return fault
