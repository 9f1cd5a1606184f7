"""A bounded LRU of open segment files, shared by every SEGMENTED topic of the process.

A server with many small segments (``segment.bytes=14`` makes one a publish) must not hold
a descriptor per segment: it would run out of them and stop accepting connections
(CONTRACT section 12). Segment ``.log`` files are therefore opened on demand, by their
current name, and kept in one LRU of at most ``limit`` descriptors
(``log.segment.open.files.max``). A descriptor is pinned only for the duration of one
system call (a ``pread``, ``pwrite``, ``fsync``…), never across a reader's pause, so
thousands of idle follow readers pin nothing; the least recently used unpinned one is
closed when the LRU is full. Pinned descriptors may take the count past ``limit`` for
the length of those calls.

Index files are read into memory at load; the segments being written (one active segment
a topic, a segment the cleaner or recovery is building) write their entries through the
same LRU, so a server with many written topics holds no descriptor per topic either.
``storage.file_limits`` caps ``limit`` at a quarter of the process's open-file limit.

A segment renamed to ``.deleted`` keeps a private descriptor (``LogSegment.retire``), so a
reader that took its snapshot of the segment list before the rename keeps reading the
right bytes after the delayed delete unlinks the file.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Iterator
from typing import Protocol

DEFAULT_LIMIT = 256

new_key = itertools.count(1).__next__  # a key per file owner, never reused


class Openable(Protocol):
    handle_key: int

    def open_fd(self) -> int:
        """Open the file by its current name (FileNotFoundError when it is gone)."""
        ...


class _Entry:
    __slots__ = ("doomed", "fd", "pins")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pins = 0
        self.doomed = False  # dropped while pinned: close at the last unpin


class FileHandles:
    """``use(owner)`` yields an open descriptor of the owner's file, opening it if needed."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._open: OrderedDict[int, _Entry] = OrderedDict()
        self._dead: deque[int] = deque()  # keys of owners collected (appended lock-free)
        self.opens = 0  # descriptors opened since start (a miss each), for tests and metrics

    @contextlib.contextmanager
    def use(self, owner: Openable) -> Iterator[int]:
        key = owner.handle_key
        with self._lock:
            while self._dead:
                self._drop_locked(self._dead.popleft())
            entry = self._open.get(key)
            if entry is None:
                entry = _Entry(owner.open_fd())
                self.opens += 1
                self._open[key] = entry
                self._evict()
            else:
                self._open.move_to_end(key)
            entry.pins += 1
        try:
            yield entry.fd
        finally:
            with self._lock:
                entry.pins -= 1
                if entry.doomed and not entry.pins:
                    os.close(entry.fd)

    def _evict(self) -> None:
        if len(self._open) <= self.limit:
            return
        for key in [k for k, e in self._open.items() if not e.pins]:
            if len(self._open) <= self.limit:
                return
            os.close(self._open.pop(key).fd)

    def drop(self, key: int) -> None:
        """Close the descriptor of owner ``key`` (now, or when its last user lets go)."""
        with self._lock:
            self._drop_locked(key)

    def forget(self, key: int) -> None:
        """``drop`` for a finaliser: never blocks (it may run while this thread holds the
        lock); the descriptor closes at the next ``use``."""
        self._dead.append(key)

    def _drop_locked(self, key: int) -> None:
        entry = self._open.pop(key, None)
        if entry is None:
            return
        if entry.pins:
            entry.doomed = True
        else:
            os.close(entry.fd)

    @property
    def open_count(self) -> int:
        with self._lock:
            return len(self._open)


# One LRU per process: the bound is on the process's descriptor table.
HANDLES = FileHandles()
