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
format it names.
"""

from __future__ import annotations

import os
from pathlib import Path

from compactlog.errors import StorageError
from compactlog.storage.segmented.files import atomic_write, fsync_dir

SERVER_DIR = "~server"
FORMAT_FILE = "FORMAT"
CURRENT = 2
TOPIC_FILE = "topic.json"


def server_file(root: Path, name: str) -> Path:
    """Where the server keeps its file ``name`` under the segments root ``root``; a file
    of that name an older server left at the root itself is moved there first."""
    folder = root / SERVER_DIR
    path = folder / name
    legacy = root / name
    if legacy.is_file() and not legacy.is_symlink():
        folder.mkdir(exist_ok=True)
        if path.exists():
            legacy.unlink()  # moved already, the unlink was interrupted
        else:
            os.replace(legacy, path)
        fsync_dir(folder)
        fsync_dir(root)
    return path


def write_format(root: Path) -> None:
    (root / SERVER_DIR).mkdir(exist_ok=True)
    atomic_write(server_file(root, FORMAT_FILE), f"{CURRENT}\n".encode())


def read_format(root: Path) -> int | None:
    """The version ``root`` declares; None without a ``FORMAT`` file."""
    path = server_file(root, FORMAT_FILE)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise StorageError(f"{path}: not a format version: {text[:40]!r}", file=path) from None


def holds_topics(root: Path) -> bool:
    return any((entry / TOPIC_FILE).exists() for entry in root.iterdir() if entry.is_dir())


def refusal(root: Path, found: int | None) -> StorageError:
    what = "no FORMAT file (format 1)" if found is None else f"format {found}"
    return StorageError(
        f"segments directory {root} holds topics in {what}, and this version reads only "
        f"format {CURRENT}; run: compactlog migrate {root.parent}"
    )


def ensure_format(root: Path) -> None:
    """Accept ``root`` if it is in the current format (stamping a new one), else refuse."""
    found = read_format(root)
    if found == CURRENT:
        return
    if found is None and not holds_topics(root):
        write_format(root)
        return
    raise refusal(root, found)
