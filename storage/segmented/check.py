"""The SEGMENTED half of ``compactlog check`` (``storage/check.py``): read every file.

Per topic directory: ``topic.json``, ``cursors.json``, ``log-start-offset`` and
``recovery-point`` through their checksums and strict parses; every ``.log`` segment
batch by batch (CRC, increasing offsets within and across segments, the file ending
where its last batch does); every ``.index`` entry against the batch at its position and
every ``.timeindex`` entry against the batch it names. Nothing is opened for writing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from compactlog.errors import CompactlogError, CorruptData
from compactlog.storage.check import CheckReport
from compactlog.storage.segmented import state_file
from compactlog.storage.segmented.consumer_offsets import SegmentCursors
from compactlog.storage.segmented.index import IndexCorrupt, OffsetIndex, TimeIndex
from compactlog.storage.segmented.log import LOG_START_FILE, RECOVERY_POINT_FILE
from compactlog.storage.segmented.manager import read_topic_file
from compactlog.storage.segmented.scan import fd_reader, iter_batches
from compactlog.storage.segmented.segment import CLEANED, DELETED, LOG_EXT, SWAP
from compactlog.storage.segmented.version import (
    CHECKPOINT_FILE,
    FORMAT_FILE,
    SERVER_DIR,
    TOPIC_FILE,
    legacy_file,
    read_format,
    server_file,
)

_MAX_INDEX_ENTRIES = 2**31


@dataclass
class _Batch:
    position: int
    max_ts: int


def check_segments(root: Path, report: CheckReport) -> None:
    try:
        read_format(root)
    except CompactlogError as exc:
        report.problem(str(server_file(root, FORMAT_FILE)), str(exc))
    _check_checkpoint(
        legacy_file(root, CHECKPOINT_FILE) or server_file(root, CHECKPOINT_FILE), report
    )
    for entry in sorted(root.iterdir()):
        if entry.name == SERVER_DIR:
            continue
        if entry.is_dir() and "~" not in entry.name:
            _check_topic(entry, report)
        elif entry.is_dir():
            report.note(str(entry), "an interrupted create or delete (removed at start)")


def _check_checkpoint(path: Path, report: CheckReport) -> None:
    try:
        body = state_file.read(path)
        if body is None:
            return
        lines = body.decode().splitlines()
        if lines[:1] != ["0"] or len(lines) != 2 + int(lines[1]):
            raise ValueError("not version 0 with its entry count")
        for line in lines[2:]:
            if not line.rsplit(" ", 1)[-1].isdigit():
                raise ValueError(f"bad entry {line[:60]!r}")
    except (CompactlogError, ValueError, IndexError) as exc:
        report.problem(str(path), f"malformed ({exc})")


def _check_topic(directory: Path, report: CheckReport) -> None:
    report.count("SEGMENTED topics")
    for check in (
        lambda: read_topic_file(directory / TOPIC_FILE),
        lambda: SegmentCursors(directory, repair=False),
        lambda: state_file.read_int(directory / LOG_START_FILE),
        lambda: state_file.read_int(directory / RECOVERY_POINT_FILE),
    ):
        try:
            check()
        except CompactlogError as exc:
            report.problem(str(directory), str(exc))
    last = -1
    for name in sorted(os.listdir(directory)):
        path = directory / name
        if name.endswith((CLEANED, SWAP, DELETED)) or ".bad-" in name:
            report.note(str(path), "left over (the server settles it at start)")
        elif name.endswith(LOG_EXT):
            last = _check_segment(path, last, report)


def _check_segment(path: Path, last: int, report: CheckReport) -> int:
    """Check one segment and its indexes; return its last offset (or ``last``)."""
    report.count("segments")
    base = int(path.name[:20])
    batches: dict[int, _Batch] = {}
    size = path.stat().st_size
    end = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        for _buf, _p, header, pos in iter_batches(fd_reader(fd), 0, size, str(path)):
            report.count("segment batches")
            first = header.first_id.entry_id
            if header.first_id.ledger_id or header.last_id.ledger_id:
                report.problem(f"{path}, byte {pos}", "batch ids are not offsets")
            if first <= last or first < base:
                report.problem(f"{path}, byte {pos}", f"offset {first} does not follow {last}")
            last = header.last_id.entry_id
            batches[first] = _Batch(pos, header.max_event_time_ms)
            end = pos + header.size
    except CorruptData as exc:
        report.problem(str(path), str(exc))
        return last
    finally:
        os.close(fd)
    if end != size:
        report.problem(str(path), f"{size - end} bytes after the last batch")
    _check_indexes(path, base, size, batches, report)
    return last


def _check_indexes(
    path: Path, base: int, size: int, batches: dict[int, _Batch], report: CheckReport
) -> None:
    index_path = path.with_suffix(".index")
    time_path = path.with_suffix(".timeindex")
    try:
        if index_path.exists():
            offsets = OffsetIndex.load(index_path, base, _MAX_INDEX_ENTRIES * 8, size)
            for off, pos in zip(offsets.offsets, offsets.positions, strict=True):
                found = batches.get(off)
                if found is None or found.position != pos:
                    report.problem(str(index_path), f"entry ({off}, {pos}) names no batch")
        if time_path.exists():
            times = TimeIndex.load(time_path, base, _MAX_INDEX_ENTRIES * 12, 2**63)
            for ts, off in zip(times.timestamps, times.offsets, strict=True):
                found = batches.get(off)
                if ts < 0 and off == base and not batches:
                    continue  # the entry of a segment closed without batches
                if found is None or found.max_ts != ts:
                    report.problem(str(time_path), f"entry ({ts}, {off}) names no batch")
    except IndexCorrupt as exc:
        report.problem(str(path), f"index: {exc}")
