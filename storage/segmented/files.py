"""Small durable-file helpers: checked writes that never leave a partial record behind,
and atomic replace (temp + fsync + rename + dir fsync).

A write to a full disk may store part of what was asked and return the count (a short
write) or fail with ENOSPC after some bytes landed. ``write_all`` writes until everything
is down or an error comes, and on an error cuts the file back to where the write began
(``cut_back``), so the caller never acknowledges, and no reader ever sees, part of a
batch. An ``OSError`` leaves here as the error CONTRACT section 11 names for its cause
(``compactlog.errors.from_os_error``: DISK_FULL, FILE_LIMIT, STORAGE_UNAVAILABLE).
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from compactlog.errors import CompactlogError, StorageUnavailable, from_os_error


class TornTail(StorageUnavailable):
    """A failed write whose partial bytes could not be cut back either: the file ends in
    bytes no reader may trust until ``cut_back`` succeeds (the caller retries it before
    its next write)."""


def write_all(fd: int, data: bytes | memoryview, position: int, doing: str, path: Path) -> None:
    """Write ``data`` at ``position``, looping over short writes. On an error after a
    short write the file is cut back to ``position`` (a ``pwrite`` that raises wrote
    nothing, so only earlier short writes leave bytes); the error is raised as ours, or
    ``TornTail`` naming it when the cut fails too."""
    view = memoryview(data)
    done = 0
    try:
        while done < len(view):
            written = os.pwrite(fd, view[done:], position + done)
            if written <= 0:  # no progress and no errno: a full device, as Linux reports it
                raise OSError(28, os.strerror(28), str(path))
            done += written
    except OSError as exc:
        error = from_os_error(exc, doing, path)
        if done:
            cut_back(fd, position, path, error)
        raise error from None


def cut_back(fd: int, size: int, path: Path, cause: CompactlogError | None = None) -> None:
    """Truncate the file to ``size``; ``TornTail`` when even that fails."""
    try:
        os.ftruncate(fd, size)
    except OSError as exc:
        reason = f"; first: {cause}" if cause is not None else ""
        raise TornTail(
            f"{path}: cannot cut a failed write back to {size} bytes "
            f"({exc.strerror or exc}){reason}",
            path=path,
            errno=errno.errorcode.get(exc.errno or 0, str(exc.errno)),
        ) from None


def rename_durably(src: Path, dst: Path, doing: str) -> None:
    """Rename ``src`` to ``dst`` and sync their directory, or change nothing: a rename whose
    directory sync fails is undone and the error raised as ours; one that cannot even be
    undone stands (its caller's next start finishes it)."""
    try:
        os.rename(src, dst)
    except OSError as exc:
        raise from_os_error(exc, doing, src) from None
    try:
        fsync_dir(dst.parent)
    except OSError as exc:
        error = from_os_error(exc, doing, dst.parent)
        try:
            os.rename(dst, src)
        except OSError:
            return
        raise error from None


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` so that a crash leaves either the old or the new content; a write
    that fails leaves the old content and no temporary file, and raises our error."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise from_os_error(exc, f"writing {path.name}", path) from None


def unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
