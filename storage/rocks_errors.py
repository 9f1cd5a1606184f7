"""rocksdict's errors as ours.

rocksdict raises a plain ``Exception`` whose text is RocksDB's status ("IO error…",
"Corruption…"). ``storage.rocks`` catches every one and raises what this module makes
of it instead, so nothing above sees rocksdict: a checksum or format failure is
``CorruptData`` (damage, CONTRACT section 11); an I/O error is what the contract names for
its cause (no space: ``DiskFull``, no file handle: ``FileLimit``, any other I/O error:
``StorageUnavailable``; RocksDB's status text carries the OS's message, which is all
rocksdict gives); anything else ``StorageError``. Each on one line, saying what was being
done.
"""

from __future__ import annotations

from pathlib import Path

from compactlog.errors import (
    CompactlogError,
    CorruptData,
    DiskFull,
    FileLimit,
    StorageError,
    StorageUnavailable,
)

# RocksDB's IOStatus texts carry strerror(); these name the causes the contract separates.
_DISK_FULL = ("No space left on device", "Disk quota exceeded")
_FILE_LIMIT = ("Too many open files",)
_UNAVAILABLE = (("Permission denied", "EACCES"), ("Read-only file system", "EROFS"))


# The texts of RocksDB's LOCK file held: by another process (fcntl refused:
# "While lock file: PATH/LOCK: Resource temporarily unavailable") or by this one ("lock
# hold by current process"). Opening the LOCK file itself ("While open a file for lock")
# fails for the OS's reasons (permissions, no descriptor, no space) like any other file.
_HELD = ("While lock file:", "lock hold by current process")


def is_locked(exc: BaseException) -> bool:
    """Whether a failed open says another holder has the store's LOCK (not a damaged
    "block", not a LOCK file that could not be opened)."""
    text = _one_line(exc)
    return not _is_corruption(text) and any(held in text for held in _HELD)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _is_corruption(text: str) -> bool:
    return text.startswith("Corruption") or "checksum mismatch" in text


def _resource_error(text: str, message: str, path: object) -> CompactlogError | None:
    """The contract's error for an I/O failure RocksDB reported, None for another kind."""
    if any(cause in text for cause in _DISK_FULL):
        return DiskFull(f"{message}; nothing of this call was kept", path=path, errno="ENOSPC")
    if any(cause in text for cause in _FILE_LIMIT):
        return FileLimit(f"{message}; nothing of this call was kept", path=path, errno="EMFILE")
    named = [name for cause, name in _UNAVAILABLE if cause in text]
    if text.startswith("IO error") or named:
        errno = (named or ["EIO"])[0]  # in the text too, as ``from_os_error`` writes it
        return StorageUnavailable(f"{message} ({errno})", path=path, errno=errno)
    return None


def wrap_error(exc: Exception, what: str = "", path: object = None) -> CompactlogError:
    """rocksdict's plain exception as ours; a checksum or format failure is CorruptData,
    an I/O failure DiskFull, FileLimit or StorageUnavailable (metadata ``path``)."""
    text = _one_line(exc)
    where = f" ({what})" if what else ""
    if _is_corruption(text):
        return CorruptData(f"RocksDB{where}: {text}")
    message = f"RocksDB{where}: {text}"
    return _resource_error(text, message, path) or StorageError(message)


def open_error(path: Path, exc: Exception) -> CompactlogError:
    """A store that failed to open: damage (nothing changed, how to inspect it) or not."""
    text = _one_line(exc)
    if _is_corruption(text):
        return CorruptData(
            f"RocksDB store {path} is damaged and was not opened ({text}); nothing was "
            "changed or dropped: inspect it with `compactlog check DATA_DIR`"
        )
    message = f"RocksDB store {path} cannot be opened: {text}"
    return _resource_error(text, message, path) or StorageError(message)
