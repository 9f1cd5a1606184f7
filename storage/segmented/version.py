"""The format version of a segments directory: a ``FORMAT`` file beside the topics.

Content ``2\\n``: segment files are concatenations of stored batches (``storage/batch.py``).
Format 1 (per-record frames, no ``FORMAT`` file) came before; its bytes must never be read
as batches, so a directory holding topics and no ``FORMAT`` file, or another version, is
refused at start with one line that names the command converting it
(``storage/segmented/migrate.py``). The file is written when a directory starts empty,
and last by a migration, so its presence means every segment is in the format it names.
Its content is checked strictly (digits and one newline): anything else refuses the start.
"""

from __future__ import annotations

import re
from pathlib import Path

from compactlog.errors import StorageError
from compactlog.storage.segmented.files import atomic_write

FORMAT_FILE = "FORMAT"
CURRENT = 2
TOPIC_FILE = "topic.json"


def read_format(root: Path) -> int | None:
    """The version ``root`` declares; None without a ``FORMAT`` file."""
    path = root / FORMAT_FILE
    try:
        text = path.read_bytes().decode("ascii", errors="replace")
    except FileNotFoundError:
        return None
    if not re.fullmatch(r"[0-9]{1,9}\n", text):
        raise StorageError(f"{path}: not a format version: {text[:40]!r}")
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
    """Accept ``root`` if it is in the current format (stamping a new one), else refuse."""
    found = read_format(root)
    if found == CURRENT:
        return
    if found is None and not holds_topics(root):
        atomic_write(root / FORMAT_FILE, f"{CURRENT}\n".encode())
        return
    raise refusal(root, found)
