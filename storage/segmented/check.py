"""The SEGMENTED half of ``compactlog check`` (``storage/check.py``): read every file.

Per topic directory: ``topic.json``, ``cursors.json``, ``log-start-offset`` and
``recovery-point`` through their checksums and strict parses; every ``.log`` segment
batch by batch (CRC, increasing offsets within and across segments, the file ending
where its last batch does); every ``.index`` entry against the batch at its position and
every ``.timeindex`` entry against the batch it names; every sealed segment against its
``segments.manifest`` entry (``manifest_check.compare``: one line for a segment gone, cut
short or ending early, with the offsets lost); a ``cursors.journal`` cut short, with what
was dropped. Nothing is opened for writing.
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
from compactlog.storage.segmented.manifest import MANIFEST_FILE, decode
from compactlog.storage.segmented.manifest_check import Figures, missing
from compactlog.storage.segmented.manifest_check import compare as compare_figures
from compactlog.storage.segmented.scan import fd_reader, iter_batches
from compactlog.storage.segmented.segment import CLEANED, DELETED, LOG_EXT, SWAP, file_name
from compactlog.storage.segmented.topic_dirs import read_topic_file
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
        lambda: _check_cursors(directory, report),
        lambda: state_file.read_int(directory / LOG_START_FILE),
        lambda: state_file.read_int(directory / RECOVERY_POINT_FILE),
    ):
        try:
            check()
        except CompactlogError as exc:
            report.problem(str(directory), str(exc))
    try:
        log_start = state_file.read_int(directory / LOG_START_FILE) or 0
    except CompactlogError:
        log_start = 0  # reported above
    sealed = _read_manifest(directory, report)
    segments = sorted(n for n in os.listdir(directory) if n.endswith(LOG_EXT))
    for name in sorted(os.listdir(directory)):
        if name.endswith((CLEANED, SWAP, DELETED)) or ".bad-" in name:
            report.note(str(directory / name), "left over (the server settles it at start)")
    last = -1
    for i, name in enumerate(segments):
        path = directory / name
        own = CheckReport()
        last, figures = _check_segment(path, last, own)
        report.merge_counts(own)
        active = i == len(segments) - 1 and (sealed is None or figures.base not in sealed)
        expected = None if sealed is None or active else sealed.pop(figures.base, None)
        _settle(path, expected, figures, own, report, sealed is None or active)
    for expected in (sealed or {}).values():
        if expected.last >= log_start and expected.batches:
            path = directory / file_name(expected.base, LOG_EXT)
            report.problem(str(path), missing(expected).describe())


def _check_cursors(directory: Path, report: CheckReport) -> None:
    cursors = SegmentCursors(directory, repair=False)
    if cursors.dropped is not None:
        report.problem(str(cursors.journal), f"cut short: {cursors.dropped}")


def _read_manifest(directory: Path, report: CheckReport) -> dict[int, Figures] | None:
    """The manifest's entries (a pending swap applied when the files hold it); None
    when there is none to compare with."""
    path = directory / MANIFEST_FILE
    try:
        body = state_file.read(path)
        if body is None:
            if len(list(directory.glob(f"*{LOG_EXT}"))) > 1:
                report.note(str(path), "missing (the server builds it at its next start)")
            return None
        entries, swap = decode(path, body)
    except CompactlogError as exc:
        report.problem(str(path), f"{exc} (the server rebuilds it if the segments are whole)")
        return None
    if swap is not None and (directory / file_name(swap.figures.base, LOG_EXT)).exists():
        others = [b for b in swap.replaces if b != swap.figures.base]
        if not any((directory / file_name(b, LOG_EXT)).exists() for b in others):
            for base in swap.replaces:
                entries.pop(base, None)
            entries[swap.figures.base] = swap.figures
    return entries


def _settle(
    path: Path,
    expected: Figures | None,
    figures: Figures,
    own: CheckReport,
    report: CheckReport,
    unlisted: bool,
) -> None:
    """A segment's findings: one line when its manifest entry says it lost records (what
    its scan and indexes found are then notes: the cut's consequences)."""
    damaged = any(line.startswith(str(path)) for line in own.problems)
    mismatch = None if expected is None else compare_figures(expected, figures, damaged)
    if expected is None and not unlisted:
        report.note(str(path), "not in the manifest (the server adds it at its next start)")
    if mismatch is None:
        report.problems += own.problems
        report.notes += own.notes
        return
    report.problem(str(path), mismatch.describe())
    report.notes += own.notes + [f"{line} (with the damage above)" for line in own.problems]


def _check_segment(path: Path, last: int, report: CheckReport) -> tuple[int, Figures]:
    """Check one segment and its indexes; return its last offset (or ``last``) and its
    figures as found."""
    report.count("segments")
    base = int(path.name[:20])
    batches: dict[int, _Batch] = {}
    size = path.stat().st_size
    end, count, own_last, max_ts = 0, 0, base - 1, -1
    fd = os.open(path, os.O_RDONLY)
    try:
        for _buf, _p, header, pos in iter_batches(fd_reader(fd), 0, size, str(path)):
            report.count("segment batches")
            first = header.first_id.entry_id
            if header.first_id.ledger_id or header.last_id.ledger_id:
                report.problem(f"{path}, byte {pos}", "batch ids are not offsets")
            if first <= last or first < base:
                report.problem(f"{path}, byte {pos}", f"offset {first} does not follow {last}")
            last = own_last = header.last_id.entry_id
            batches[first] = _Batch(pos, header.max_event_time_ms)
            end, count, max_ts = pos + header.size, count + 1, max(max_ts, header.max_event_time_ms)
    except CorruptData as exc:
        report.problem(str(path), str(exc))
        return last, Figures(base, own_last, size, count, max_ts)
    finally:
        os.close(fd)
    if end != size:
        report.problem(str(path), f"{size - end} bytes after the last batch")
    _check_indexes(path, base, size, batches, report)
    return last, Figures(base, own_last, size, count, max_ts)


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
