"""The server's own small files, checksummed: written whole, validated before any use.

``topic.json``, ``cursors.json``, ``log-start-offset``, ``recovery-point`` and the
cleaner's ``cleaner-offset-checkpoint`` are each a text body followed by one trailer
line holding the CRC-32C of the body::

    <body, ending in a newline>
    #crc32c:<8 hex digits>

A flipped byte anywhere fails the checksum (or, in the trailer, its format), so a file
is used exactly as written or not at all. Files written before the trailer existed
(no ``#crc32c`` anywhere) are read as they are and must then pass their reader's strict
parse; they gain a trailer the next time they are written.

What happens to a file that fails is its reader's choice, by what the file is worth:
a cache (``recovery-point``, the cleaner checkpoint) is set aside — renamed
``<name>.bad-<ms>``, logged, never read again — and rebuilt; a file whose loss would
change what the topic serves (its config, cursors, log start offset) takes the topic
offline instead (``storage.offline``), left where it is.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

import crc32c

from compactlog.errors import CorruptData
from compactlog.storage.segmented.files import atomic_write

log = logging.getLogger(__name__)

_TRAILER = re.compile(rb"#crc32c:([0-9a-f]{8})\n\Z")
_MARK = b"#crc32c"


class BadStateFile(CorruptData):
    """A state file that failed its checksum or its reader's parse."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


def encode(body: bytes) -> bytes:
    if not body.endswith(b"\n"):
        body += b"\n"
    return body + b"#crc32c:%08x\n" % crc32c.crc32c(body)


def decode(path: Path, data: bytes) -> bytes:
    """The body of a state file's bytes, checksum checked (``BadStateFile`` if not)."""
    found = _TRAILER.search(data)
    if found is None:
        if _MARK in data:
            raise BadStateFile(path, "damaged checksum line")
        return data  # written before checksums: the reader's strict parse decides
    body = data[: found.start()]
    if crc32c.crc32c(body) != int(found.group(1), 16):
        raise BadStateFile(path, "checksum mismatch")
    return body


def read(path: Path) -> bytes | None:
    """The checked body of ``path``, None when there is no such file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadStateFile(path, f"unreadable ({exc.strerror or exc})") from None
    return decode(path, data)


def write(path: Path, body: bytes) -> None:
    atomic_write(path, encode(body))


def read_int(path: Path) -> int | None:
    """A non-negative integer file (``log-start-offset``, ``recovery-point``)."""
    body = read(path)
    if body is None:
        return None
    text = body.decode("ascii", errors="replace").strip()
    if not text.isdigit() or not text.isascii():
        raise BadStateFile(path, f"not an offset: {text[:40]!r}")
    return int(text)


def write_int(path: Path, value: int) -> None:
    write(path, f"{value}\n".encode())


def set_aside(path: Path, problem: str) -> Path | None:
    """Rename a file that failed validation to ``<name>.bad-<ms>`` (never read again)."""
    target = path.with_name(f"{path.name}.bad-{int(time.time() * 1000)}")
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    log.error("%s failed validation (%s): set aside as %s", path, problem, target.name)
    return target
