"""The segmented scheduler's background work under a disk fault: one warning when it
starts, one when the work goes through again, never a traceback per tick; other
failures keep their traceback (``storage.segmented.scheduled``)."""

from __future__ import annotations

import errno
import logging

import pytest

from compactlog.storage.segmented.scheduled import ScheduledFaults


def test_a_disk_fault_is_one_line_until_it_clears(caplog: pytest.LogCaptureFixture) -> None:
    faults = ScheduledFaults()
    full = OSError(errno.ENOSPC, "No space left on device", "/data/t/log-start-offset")
    with caplog.at_level(logging.WARNING):
        for _ in range(50):  # a tick a second while the disk stays full
            faults.failed("t", full)
        faults.succeeded("t")
        faults.succeeded("t")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "refused (DISK_FULL" in lines[0] and "log-start-offset" in lines[0]
    assert lines[1] == "scheduled work on t goes through again"
    assert all(r.exc_info is None for r in caplog.records)


def test_another_cause_or_another_failure_is_logged_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    faults = ScheduledFaults()
    with caplog.at_level(logging.WARNING):
        faults.failed("t", OSError(errno.ENOSPC, "No space left on device", "/d/x"))
        faults.failed("t", OSError(errno.EACCES, "Permission denied", "/d/x"))
        faults.failed("u", OSError(errno.EACCES, "Permission denied", "/d/y"))
        faults.failed("t", ValueError("a defect"))
    reasons = [r.getMessage() for r in caplog.records]
    assert "DISK_FULL" in reasons[0] and "STORAGE_UNAVAILABLE" in reasons[1]
    assert "scheduled work on u refused" in reasons[2]
    assert caplog.records[3].levelno == logging.ERROR and caplog.records[3].exc_info
