"""Converting a segments directory from format 1 (one frame per record) to format 2 (batches).

Format 1 had no ``FORMAT`` file; each segment ``.log`` was a concatenation of records,
each with its own CRC (all integers big-endian)::

    byte  size  field
       0     4  length          uint32, bytes that follow this field (48 + key + value + headers)
       4     4  crc             uint32, CRC-32C (Castagnoli) of bytes 8 .. 4+length
       8     8  offset          int64
      16     8  timestamp       int64, event time in ms (publish time if none was given)
      24     8  publish_time    int64, log append time in ms
      32     8  delete_horizon  int64, -1 until a cleaner pass kept this tombstone
      40     4  key_length      int32, -1 = null key
      44     4  value_length    int32, -1 = null value (a tombstone when keyed)
      48     4  headers_length  int32, bytes of the header block
      52     .  key bytes, value bytes, header block

    header block: repeated { uint16 name_length, name (UTF-8), uint32 value_length, value }

Format 2 is drawn in ``storage/batch.py``. Byte 8 tells the two apart: a format-1 record has
the top byte of its offset there (0), a batch its magic (2).

Records are regrouped into batches the way they were published: a run of consecutive
offsets with one publish time (one Publish) becomes one batch, encoded by the same codec as
a live append (``batch.records_to_request`` + ``batch.encode_request``), so offsets, times,
keys, values, properties and tombstone delete horizons (per batch now; a run splits where
its tombstones' horizons differ) all survive.

Crash safety: each ``.log`` is rewritten to ``<name>.v2.tmp`` beside it, fsynced, its
indexes removed (start-up rebuilds them) and renamed over the old file; ``FORMAT`` is
written last. A run interrupted anywhere leaves no ``FORMAT`` file, so the server still
refuses the directory, and a re-run converts whatever is still in format 1.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c

from compactlog.errors import StorageError
from compactlog.storage import batch
from compactlog.storage.segmented.files import fsync_dir, unlink_quietly
from compactlog.storage.segmented.scan import ChunkReader, fd_reader
from compactlog.storage.segmented.version import CURRENT, TOPIC_FILE, read_format, write_format
from compactlog.storage.types import MessageId, Record

log = logging.getLogger(__name__)

_LEGACY = struct.Struct(">IIqqqqiii")
_LEGACY_SIZE = _LEGACY.size  # 52
_NAME_LEN = struct.Struct(">H")
_VALUE_LEN = struct.Struct(">I")
_MAX_BATCH_BYTES = 1024 * 1024
_TMP = ".v2.tmp"


class _Bad(Exception):
    """A format-1 record that is torn or fails its CRC."""


@dataclass(frozen=True, slots=True)
class LegacyRecord:
    offset: int
    timestamp: int
    publish_time: int
    delete_horizon: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, str]
    size: int

    @property
    def tombstone(self) -> bool:
        return self.key is not None and self.value is None


def _headers(block: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    p = 0
    while p < len(block):
        (nl,) = _NAME_LEN.unpack_from(block, p)
        name = block[p + 2 : p + 2 + nl].decode()
        p += 2 + nl
        (vl,) = _VALUE_LEN.unpack_from(block, p)
        out[name] = block[p + 4 : p + 4 + vl].decode()
        p += 4 + vl
    return out


def _decode(buf: bytes, p: int, n: int) -> LegacyRecord:
    """The record at ``buf[p:]`` after its length and CRC pass; ``_Bad`` otherwise."""
    if n - p < _LEGACY_SIZE:
        raise _Bad()
    length, crc, off, ts, pt, horizon, kl, vl, hl = _LEGACY.unpack_from(buf, p)
    end = p + 4 + length
    if kl < -1 or vl < -1 or hl < 0 or _LEGACY_SIZE - 4 + max(kl, 0) + max(vl, 0) + hl != length:
        raise _Bad()
    if end > n or crc32c.crc32c(memoryview(buf)[p + 8 : end]) != crc:
        raise _Bad()
    q = p + _LEGACY_SIZE
    key = None if kl < 0 else bytes(buf[q : q + kl])
    q += max(kl, 0)
    value = None if vl < 0 else bytes(buf[q : q + vl])
    q += max(vl, 0)
    headers = _headers(bytes(buf[q : q + hl])) if hl else {}
    return LegacyRecord(off, ts, pt, horizon, key, value, headers, 4 + length)


def legacy_records(path: Path, fd: int, truncate_bad: bool) -> Iterator[LegacyRecord]:
    """Every record of a format-1 file up to the first bad one, which ends the file when
    ``truncate_bad`` and is a ``StorageError`` otherwise."""
    size = os.fstat(fd).st_size
    reader = ChunkReader(fd_reader(fd), 0, size, _MAX_BATCH_BYTES)
    buf = reader.next(0)
    pos = 0
    try:
        while buf:
            p, n = 0, len(buf)
            while p < n:
                if not reader.exhausted and (
                    n - p < _LEGACY_SIZE or batch.peek_length(buf, p) > n - p
                ):
                    break
                rec = _decode(buf, p, n)
                yield rec
                p += rec.size
                pos += rec.size
            buf = reader.next(p)
        if pos < size:
            raise _Bad()
    except _Bad:
        if not truncate_bad:
            raise StorageError(
                f"{path}, byte {pos}: torn or corrupt format-1 record; "
                "not converted (restore the file or move the topic away)"
            ) from None
        log.warning("%s: dropping the torn tail from byte %d", path, pos)


def _groups(records: Iterator[LegacyRecord]) -> Iterator[tuple[list[LegacyRecord], int]]:
    """Runs of one Publish (consecutive offsets, one publish time, at most 1 MiB), split
    where tombstone horizons differ: ``(records, the batch's delete horizon)``."""
    group: list[LegacyRecord] = []
    size = 0
    horizon: int | None = None
    for rec in records:
        own = rec.delete_horizon if rec.tombstone else None
        if group and (
            rec.offset != group[-1].offset + 1
            or rec.publish_time != group[0].publish_time
            or size + rec.size > _MAX_BATCH_BYTES
            or (own is not None and horizon is not None and own != horizon)
        ):
            yield group, batch.NO_HORIZON if horizon is None else horizon
            group, size, horizon = [], 0, None
        group.append(rec)
        size += rec.size
        horizon = own if own is not None else horizon
    if group:
        yield group, batch.NO_HORIZON if horizon is None else horizon


def _to_batch(group: list[LegacyRecord], horizon: int) -> bytes:
    """One packed batch of the group, through the live append path's encoder."""
    first, last = group[0].offset, group[-1].offset
    publish = group[0].publish_time
    request = batch.records_to_request(
        [Record(r.key, r.value, r.headers, r.timestamp) for r in group]
    )
    run = batch.encode_request(request, 0, 0, first, publish)
    return batch.pack(
        run.payload,
        run.count,
        MessageId(0, first),
        MessageId(0, last),
        publish,
        run.max_event_time_ms,
        0,
        horizon,
    )


def _format_of(path: Path) -> int | None:
    """1 or 2 by byte 8 of the file; None for an empty file (either format)."""
    with open(path, "rb") as fh:
        head = fh.read(9)
    if not head:
        return None
    return batch.BATCH_MAGIC if len(head) == 9 and head[8] == batch.BATCH_MAGIC else 1


def convert_segment(path: Path, truncate_bad: bool) -> bool:
    """Rewrite one format-1 ``.log`` (or ``.log.swap``) as batches; False if it was not
    format 1. A bad record ends the copy when ``truncate_bad`` (the topic's last segment,
    whose tail a crash may have torn, as format-1 start-up would have truncated it);
    elsewhere it is a ``StorageError`` and the file is left as it was."""
    if _format_of(path) != 1:
        return False
    tmp = path.with_name(path.name + _TMP)
    fd = os.open(path, os.O_RDONLY)
    try:
        with open(tmp, "wb") as out:
            for group, horizon in _groups(legacy_records(path, fd, truncate_bad)):
                out.write(_to_batch(group, horizon))
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        unlink_quietly(tmp)
        raise
    finally:
        os.close(fd)
    suffix = path.name[len(f"{0:020d}.log") :]
    base = path.name[:20]
    for ext in (".index", ".timeindex"):
        unlink_quietly(path.with_name(f"{base}{ext}{suffix}"))
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return True


def _segment_files(topic: Path) -> list[Path]:
    names = os.listdir(topic)
    return sorted(
        topic / n
        for n in names
        if len(n) > 20 and n[:20].isdigit() and n[20:] in (".log", ".log.swap")
    )


def migrate_segments(root: Path) -> int:
    """Convert the format-1 segments directory ``root`` to the current format in place;
    return how many segment files were rewritten (0 when it already was current)."""
    found = read_format(root)
    if found == CURRENT:
        return 0
    if found is not None:
        raise StorageError(f"{root}: format {found} has no migration to format {CURRENT}")
    converted = 0
    for topic in sorted(p for p in root.iterdir() if (p / TOPIC_FILE).exists()):
        for name in os.listdir(topic):
            if name.endswith(_TMP):
                unlink_quietly(topic / name)  # an interrupted run's leftover
        files = _segment_files(topic)
        logs = [p for p in files if p.name.endswith(".log")]
        for path in files:
            converted += convert_segment(path, truncate_bad=bool(logs) and path == logs[-1])
        # Format 1's recovery point was never held against the log, and a torn tail
        # dropped above may lie below it: start-up validates the last segment instead.
        unlink_quietly(topic / "recovery-point")
    write_format(root)
    log.info("%s: %d segment file(s) converted to format %d", root, converted, CURRENT)
    return converted
