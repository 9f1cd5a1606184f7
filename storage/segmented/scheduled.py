"""The scheduler's reports of a log's background work (flush, ``.deleted`` files,
retention) that failed: a disk fault (DISK_FULL, STORAGE_UNAVAILABLE, FILE_LIMIT) is one
warning line when it starts and one when the work goes through again, not a traceback at
every tick while the disk stays full; anything else is logged with its traceback, as a
defect. The work itself is tried again at the next tick either way."""

from __future__ import annotations

import logging

from compactlog.errors import DiskFull, FileLimit, StorageUnavailable, from_os_error

__all__ = ["ScheduledFaults"]

log = logging.getLogger("compactlog.storage.segmented.manager")

_DISK_FAULTS = (DiskFull, StorageUnavailable, FileLimit)


class ScheduledFaults:
    """What each log's background work last failed with (one scheduler thread)."""

    def __init__(self) -> None:
        self._failing: dict[str, str] = {}

    def failed(self, topic: str, exc: Exception) -> None:
        fault = from_os_error(exc, "scheduled work") if isinstance(exc, OSError) else exc
        if not isinstance(fault, _DISK_FAULTS):
            log.error("scheduled work on %s failed", topic, exc_info=exc)
            return
        reason = f"{fault.reason}: {fault}"
        if self._failing.get(topic) != reason:
            self._failing[topic] = reason
            log.warning("scheduled work on %s refused (%s); tried again each check", topic, reason)

    def succeeded(self, topic: str) -> None:
        if self._failing.pop(topic, None) is not None:
            log.warning("scheduled work on %s goes through again", topic)
