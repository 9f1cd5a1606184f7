"""The cleaner offset checkpoint: first dirty offset per topic, in one file among the
server's own files of the segments root (``~server/``, see ``storage.segmented.version``).

Format (like Kafka's ``cleaner-offset-checkpoint``)::

    0                 version
    <n>               number of entries
    <topic> <offset>  n lines

Written as a whole with temp file + fsync + rename, so a crash leaves the old or the new
file; a lost update only makes the next pass re-clean some already clean records.
"""

from __future__ import annotations

import threading
from pathlib import Path

from compactlog.errors import StorageError
from compactlog.storage.segmented.files import atomic_write

FILE_NAME = "cleaner-offset-checkpoint"
VERSION = 0


class CleanerCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._offsets = self._load()

    def _load(self) -> dict[str, int]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return {}
        try:
            if int(lines[0]) != VERSION:
                raise StorageError(f"{self.path}: unknown checkpoint version {lines[0]}")
            count = int(lines[1])
            out: dict[str, int] = {}
            for line in lines[2 : 2 + count]:
                name, offset = line.rsplit(" ", 1)
                out[name] = int(offset)
            if len(out) != count:
                raise ValueError("entry count mismatch")
            return out
        except (IndexError, ValueError) as exc:
            raise StorageError(f"{self.path}: malformed cleaner checkpoint: {exc}") from None

    def _write(self) -> None:
        body = [str(VERSION), str(len(self._offsets))]
        body += [f"{name} {offset}" for name, offset in sorted(self._offsets.items())]
        self.path.parent.mkdir(exist_ok=True)
        atomic_write(self.path, ("\n".join(body) + "\n").encode())

    def get(self, name: str) -> int | None:
        with self._lock:
            return self._offsets.get(name)

    def all(self) -> dict[str, int]:
        with self._lock:
            return dict(self._offsets)

    def update(self, name: str, offset: int) -> None:
        with self._lock:
            self._offsets[name] = offset
            self._write()

    def remove(self, name: str) -> None:
        with self._lock:
            if self._offsets.pop(name, None) is not None:
                self._write()
