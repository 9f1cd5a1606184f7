"""rocksdict's errors as ours.

rocksdict raises a plain ``Exception`` whose text is RocksDB's status ("IO error…",
"Corruption…"). ``storage.rocks`` catches every one and raises what this module makes
of it instead, so nothing above sees rocksdict: a checksum or format failure is
``CorruptData`` (damage, CONTRACT section 11), anything else ``StorageError``, each on
one line and saying what was being done.
"""

from __future__ import annotations

from pathlib import Path

from compactlog.errors import CompactlogError, CorruptData, StorageError


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _is_corruption(text: str) -> bool:
    return text.startswith("Corruption") or "checksum mismatch" in text


def wrap_error(exc: Exception, what: str = "") -> CompactlogError:
    """rocksdict's plain exception as ours; a checksum or format failure is CorruptData."""
    text = _one_line(exc)
    where = f" ({what})" if what else ""
    if _is_corruption(text):
        return CorruptData(f"RocksDB{where}: {text}")
    return StorageError(f"RocksDB{where}: {text}")


def open_error(path: Path, exc: Exception) -> CompactlogError:
    """A store that failed to open: damage (nothing changed, how to inspect it) or not."""
    text = _one_line(exc)
    if _is_corruption(text):
        return CorruptData(
            f"RocksDB store {path} is damaged and was not opened ({text}); nothing was "
            "changed or dropped: inspect it with `compactlog check DATA_DIR`"
        )
    return StorageError(f"RocksDB store {path} cannot be opened: {text}")
