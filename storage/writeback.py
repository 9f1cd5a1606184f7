"""Early writeback of a file being written: Linux's ``sync_file_range(2)``.

A file written whole and then fsynced reaches the disk in one burst at the fsync; on ext4
(one journal, ``data=ordered``) any other process's fsync landing then waits behind that
burst. Starting the writeback every so often (``SYNC_FILE_RANGE_WRITE``: start, do not
wait) sends the file in small pieces instead, as RocksDB's ``bytes_per_sync`` does for its
own files. Python's ``os`` has no binding, so libc's is called through ctypes; where there
is none (not Linux) nothing is done and the final fsync does it all, as before.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path
from typing import cast

_SYNC_FILE_RANGE_WRITE = 2  # start writeback of dirty pages, do not wait


def _libc_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    try:
        func = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (AttributeError, OSError):
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    func.restype = ctypes.c_int
    return cast(Callable[[int, int, int, int], int], func)


_sync_file_range = _libc_sync_file_range()
AVAILABLE = _sync_file_range is not None


class Writeback:
    """Starts the writeback of ``path`` every ``every`` bytes its writer reports."""

    def __init__(self, path: Path, every: int) -> None:
        self.path = path
        self.every = every if AVAILABLE else 0
        self._pending = 0
        self._fd = -1

    def wrote(self, nbytes: int) -> None:
        if not self.every:
            return
        self._pending += nbytes
        if self._pending >= self.every:
            self._pending = 0
            self._start()

    def _start(self) -> None:
        try:
            if self._fd < 0:
                self._fd = os.open(self.path, os.O_RDONLY)
            assert _sync_file_range is not None
            if _sync_file_range(self._fd, 0, 0, _SYNC_FILE_RANGE_WRITE) != 0:
                raise OSError(ctypes.get_errno(), "sync_file_range")
        except OSError:
            self.every = 0  # an optimisation only: the writer's fsync still syncs it all

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
