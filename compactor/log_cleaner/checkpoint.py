"""The cleaner offset checkpoint: first dirty offset per topic, in one file among the
server's own files of the segments root (``~server/``, see ``storage.segmented.version``).

Format (like Kafka's ``cleaner-offset-checkpoint``)::

    0                 version
    <n>               number of entries
    <topic> <offset>  n lines

followed by a checksum line (``storage.segmented.state_file``). Written as a whole with
temp file + fsync + rename, so a crash leaves the old or the new file; a lost update only
makes the next pass re-clean some already clean records. For the same reason a file that
fails its checksum or its parse is set aside (``*.bad-<ms>``, logged) and the cleaner
starts over from the log start offsets: re-cleaning is slower, never wrong. A write
refused (DISK_FULL, STORAGE_UNAVAILABLE, ...) is logged and made again, whole, at the next
change: the offsets in memory stay, so only a restart before then re-cleans from the
older file.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from compactlog.errors import CompactlogError
from compactlog.storage.segmented import state_file
from compactlog.storage.segmented.state_file import BadStateFile
from compactlog.storage.segmented.version import CHECKPOINT_FILE

FILE_NAME = CHECKPOINT_FILE
VERSION = 0

log = logging.getLogger(__name__)


class CleanerCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._offsets = self._load()

    def _load(self) -> dict[str, int]:
        try:
            return self._parse(state_file.read(self.path))
        except BadStateFile as exc:
            state_file.set_aside(self.path, str(exc))
            return {}

    def _parse(self, body: bytes | None) -> dict[str, int]:
        if body is None:
            return {}
        try:
            lines = body.decode().split("\n")
            if lines[-1] != "":
                raise ValueError("no newline at the end")
            lines.pop()
            if int(lines[0]) != VERSION or lines[0] != str(VERSION):
                raise ValueError(f"unknown checkpoint version {lines[0][:20]!r}")
            count = int(lines[1])
            if len(lines) != 2 + count:
                raise ValueError("entry count mismatch")
            out: dict[str, int] = {}
            for line in lines[2:]:
                name, offset = line.rsplit(" ", 1)
                if not offset.isdigit() or not name or name in out:
                    raise ValueError(f"bad entry {line[:60]!r}")
                out[name] = int(offset)
            return out
        except (IndexError, ValueError) as exc:
            raise BadStateFile(self.path, f"malformed cleaner checkpoint: {exc}") from None

    def _write(self) -> None:
        body = [str(VERSION), str(len(self._offsets))]
        body += [f"{name} {offset}" for name, offset in sorted(self._offsets.items())]
        try:
            self.path.parent.mkdir(exist_ok=True)
            state_file.write(self.path, ("\n".join(body) + "\n").encode())
        except CompactlogError as exc:
            log.warning("%s not written (tried again at the next pass): %s", self.path, exc)

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
