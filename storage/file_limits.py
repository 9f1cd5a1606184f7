"""The process's open-file limit, and the share of it each part of the server may hold.

A server holds descriptors for segment files (an LRU, ``segmented/handles.py``), RocksDB's
table files (its ``max_open_files``), index files while they are written, and for
connections, pipes to compaction workers and the event loop. Left alone, RocksDB keeps
every table file open and the LRU up to ``log.segment.open.files.max``, so under a low
``ulimit -n`` (``prlimit --nofile=64``, a container's default) whatever opens a file next
fails, at random. So at start (``start``) the server raises its soft limit to the hard one
(as Go's runtime and Kafka's scripts do), refuses to start below ``MIN_FILES`` in one line,
and gives the segment LRU and RocksDB a quarter of the limit each; a new stream is
refused with FILE_LIMIT (``FileBudget.check_stream``) once the descriptors in use come
within the reserve of the limit, so what is already open keeps working (CONTRACT
section 11).
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from compactlog.errors import FileLimit

MIN_FILES = 64  # an idle server holds about 25; below this nothing useful fits
_FD_DIR = "/proc/self/fd"


class TooFewFiles(Exception):
    """The limit cannot hold a server: the one line ``serve`` prints before exiting."""


def open_files() -> int:
    """Descriptors this process holds now (0 where the platform does not tell)."""
    try:
        return len(os.listdir(_FD_DIR)) - 1  # the listing's own descriptor
    except OSError:
        return 0


def holds_under(directory: Path) -> bool:
    """Whether this process still holds a descriptor on a file under ``directory`` (True
    where the platform does not tell): a closed store's files are released at once unless
    something (an iterator left in a reference cycle) still holds the store."""
    prefix = os.path.realpath(directory) + os.sep
    try:
        names = os.listdir(_FD_DIR)
    except OSError:
        return True
    for name in names:
        try:
            if os.readlink(f"{_FD_DIR}/{name}").startswith(prefix):
                return True
        except OSError:
            continue  # closed meanwhile, or the listing's own descriptor
    return False


@dataclass(frozen=True)
class FileBudget:
    """The shares of ``limit``: segment files and RocksDB table files each a quarter; the
    ``reserve`` last descriptors are kept for work already under way."""

    limit: int

    @property
    def segment_files(self) -> int:
        return max(8, self.limit // 4)

    @property
    def table_files(self) -> int:
        return max(16, self.limit // 4)

    @property
    def reserve(self) -> int:
        return max(8, self.limit // 10)

    def check_stream(self, what: str) -> None:
        """``FileLimit`` when a new ``what`` (a follow read, a stream) would take the
        process within ``reserve`` descriptors of its limit."""
        in_use = open_files()
        if in_use >= self.limit - self.reserve:
            raise FileLimit(
                f"{what} refused: {in_use} of the {self.limit} open files this process may "
                f"hold are in use (ulimit -n); close streams or raise the limit",
                limit=self.limit,
                in_use=in_use,
            )


UNLIMITED = FileBudget(1 << 20)
BUDGET = UNLIMITED  # what the running server was given (``start``); tools keep this one


def start() -> FileBudget:
    """Raise the soft limit to the hard one, check it, and make it the process's budget;
    ``TooFewFiles`` (one line) when even the hard limit is below ``MIN_FILES``."""
    global BUDGET
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # keep the soft limit we have
    if soft < MIN_FILES:
        raise TooFewFiles(
            f"the open-file limit is {soft} (ulimit -n), below the {MIN_FILES} a server needs: "
            "raise it (ulimit -n 4096, or LimitNOFILE= in a systemd unit)"
        )
    BUDGET = FileBudget(soft)
    return BUDGET
