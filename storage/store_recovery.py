"""A RocksDB store after a write it could not make: refuse writes with the cause, then
reopen the store once the cause is gone, without a restart (CONTRACT section 11).

A write that fails for want of space or permission leaves RocksDB in its background-error
state, read-only until ``DB::Resume`` or a reopen; rocksdict offers only the reopen. So
``StoreFault`` remembers the error, and each later write first asks ``ready``: within
``RETRY_S`` of the last try it answers the same error at once; after that it probes the
store's directory with a small synced write (the disk has room and lets us write again)
and, when the probe passes, the store reopens (``RocksDB.reopen``). Reads keep being
served from the open instance until that moment.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from compactlog.errors import CompactlogError, DiskFull, StorageUnavailable, from_os_error

log = logging.getLogger(__name__)

RETRY_S = 0.5  # at most two probes a second, however many writes wait
PROBE_BYTES = 1 << 20  # room for a memtable's worth of WAL to begin again
PROBE_NAME = ".write-probe"


def is_fault(error: CompactlogError) -> bool:
    """A failure that leaves the store refusing writes until reopened."""
    return isinstance(error, DiskFull | StorageUnavailable)


def probe(directory: Path) -> None:
    """Write, sync and remove a probe file of ``PROBE_BYTES``; our error when it fails."""
    path = directory / PROBE_NAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            block = b"\0" * (64 << 10)
            for _ in range(PROBE_BYTES // len(block)):
                os.write(fd, block)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise from_os_error(exc, "probing the store for space and permission", directory) from None
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


class StoreFault:
    """The fault a store is in, if any, and when to try it again."""

    def __init__(self, directory: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self.clock = clock
        self.error: CompactlogError | None = None
        self._tried = 0.0

    def fail(self, error: CompactlogError) -> None:
        if self.error is None:
            log.error("store %s refuses writes until the cause is gone: %s", self.directory, error)
        self.error = error
        self._tried = self.clock()

    def again(self) -> CompactlogError:
        """The fault as a fresh error, to raise for a write refused meanwhile."""
        assert self.error is not None
        return type(self.error)(str(self.error), **self.error.metadata)

    def ready(self) -> bool:
        """True when the store may be reopened now: the retry interval passed and the
        probe passed. Raises the fault (or the probe's newer error) otherwise."""
        if self.error is None:
            return False
        if self.clock() - self._tried < RETRY_S:
            raise self.again()
        self._tried = self.clock()
        try:
            probe(self.directory)
        except CompactlogError as error:
            self.error = error
            raise
        return True

    def cleared(self) -> None:
        log.warning("store %s writes again: the cause of %s is gone", self.directory, self.error)
        self.error = None
