"""The format version of a segments directory, and where the server keeps its own files.

Topics are directories named after the topic directly under the segments root, so a file
of the server's own beside them could collide with a topic name (a topic named
``FORMAT`` or ``cleaner-offset-checkpoint`` would have been renamed onto the file, or the
file written into the topic's directory). The server's files live in ``~server/``
instead: ``~`` cannot occur in a topic name. A file of an older server found at the
root (``FORMAT``, the cleaner checkpoint) is read once and moved there.

``~server/FORMAT`` holds ``2\\n``: segment files are concatenations of stored batches
(``storage/batch.py``). Format 1 (per-record frames, no ``FORMAT`` file) came before; its
bytes must never be read as batches, so a directory holding topics and no ``FORMAT``
file, or another version, is refused at start with one line that names the command
converting it (``storage/segmented/migrate.py``). The file is written when a directory
starts empty, and last by a migration, so its presence means every segment is in the
format it names. Its content is checked strictly (digits and one newline): anything else
refuses the start.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

from compactlog.errors import StorageError
from compactlog.storage.segmented.files import atomic_write, fsync_dir

log = logging.getLogger(__name__)

SERVER_DIR = "~server"
FORMAT_FILE = "FORMAT"
CURRENT = 2
TOPIC_FILE = "topic.json"


CHECKPOINT_FILE = "cleaner-offset-checkpoint"  # the LogCleaner's (compactor/log_cleaner)
SERVER_FILES = (FORMAT_FILE, CHECKPOINT_FILE)


def server_file(root: Path, name: str) -> Path:
    """Where the server keeps its file ``name`` under the segments root ``root``."""
    return root / SERVER_DIR / name


def legacy_file(root: Path, name: str) -> Path | None:
    """The file ``name`` an older server kept at the root itself, if there is one."""
    path = root / name
    return path if path.is_file() and not path.is_symlink() else None


def adopt_legacy_files(root: Path) -> None:
    """Move the server's files an older server left at the root into ``~server/``
    (start-up, before anything reads them); a topic may then take their names."""
    for name in SERVER_FILES:
        legacy = legacy_file(root, name)
        if legacy is None:
            continue
        path = server_file(root, name)
        path.parent.mkdir(exist_ok=True)
        if path.exists():  # both: kept out of the way and out of the topic namespace
            target = path.with_name(f"{name}.legacy-{int(time.time() * 1000)}")
            log.warning("%s and %s both exist: the first moved to %s", legacy, path, target)
            path = target
        os.replace(legacy, path)
        fsync_dir(path.parent)
        fsync_dir(root)


def write_format(root: Path) -> None:
    (root / SERVER_DIR).mkdir(exist_ok=True)
    atomic_write(server_file(root, FORMAT_FILE), f"{CURRENT}\n".encode())


def read_format(root: Path) -> int | None:
    """The version ``root`` declares; None without a ``FORMAT`` file (read where an older
    server kept it too: nothing is moved here)."""
    path = server_file(root, FORMAT_FILE)
    if not path.exists():
        path = legacy_file(root, FORMAT_FILE) or path
    try:
        text = path.read_bytes().decode("ascii", errors="replace")
    except FileNotFoundError:
        return None
    if not re.fullmatch(r"[0-9]{1,9}\n", text):
        raise StorageError(f"{path}: not a format version: {text[:40]!r}", file=path)
    return int(text)


def holds_topics(root: Path) -> bool:
    return any((entry / TOPIC_FILE).exists() for entry in root.iterdir() if entry.is_dir())


def refusal(root: Path, found: int | None) -> StorageError:
    what = "no FORMAT file (format 1)" if found is None else f"format {found}"
    return StorageError(
        f"segments directory {root} holds topics in {what}, and this version reads only "
        f"format {CURRENT}; run: compactlog migrate {root.parent}"
    )


def ensure_format(root: Path) -> None:
    """Accept ``root`` if it is in the current format (stamping a new one), else refuse;
    then move an older server's files into ``~server/``."""
    found = read_format(root)
    if found is None and not holds_topics(root):
        write_format(root)
    elif found != CURRENT:
        raise refusal(root, found)
    adopt_legacy_files(root)
