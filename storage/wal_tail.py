"""A RocksDB WAL's last record cut short by a crash, told apart from a WAL cut by damage.

The ledger store replays its WAL in absolute-consistency mode: a record that does not read
back whole refuses the open, because damage that removes acknowledged data must be seen
(CONTRACT section 11). A process killed while RocksDB writes a record leaves just such a
record at the end of the newest WAL, and that write was never acknowledged: every answer
waits for a sync (or a synced write) that waits for the write. To tell the two apart the
store keeps a mark beside its WAL (``SyncedMark``): a sequence number at or past every
acknowledged write, rewritten after each sync and before the writes it covers are
answered. An open that fails reads the WALs' framing (``wal_end``; RocksDB's log format:
32 KiB blocks of records, each a 7-byte header of CRC, length and type and a fragment of a
WriteBatch, whose first 8 bytes are its sequence number). When the one flaw is an
incomplete last record of the newest WAL whose sequence is past the mark, it is a crash's
unsynced tail, and ``storage.rocks`` opens again dropping it (RocksDB's
tolerate-corrupted-tail mode). Anything else, a cut at or before the mark, an older WAL cut
short, a record whose checksum fails, stays the refused start it was.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from compactlog.storage.segmented import state_file

BLOCK = 32 * 1024
HEADER, RECYCLABLE_HEADER = 7, 11
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
RECYCLABLE = {5: FULL, 6: FIRST, 7: MIDDLE, 8: LAST}
# Records of the log's own (compression type, timestamp sizes, a recyclable one of those)
# and any type with bit 7 set (RocksDB's "safe to ignore", as the predecessor WAL's info,
# 130, or 131 in a recycled log) carry no WriteBatch; 11 and 131 have the longer header.
METADATA = {9, 10, 11}
IGNORABLE = 0x80

MARK_NAME = "compactlog-wal-synced"
_DIGITS = 20  # every mark the same size: rewritten in place, never a shorter file


@dataclass(frozen=True)
class WalEnd:
    """How one WAL file ends: ``torn`` bytes of an incomplete last record (0: it ends
    whole), and that record's sequence number where the file tells it."""

    torn: int
    torn_seq: int | None


def wal_end(data: bytes) -> WalEnd:
    """Walk ``data``'s records by their headers (RocksDB checks the CRCs on replay)."""
    pos, size = 0, len(data)
    next_seq: int | None = None  # the sequence after the last whole WriteBatch
    start = -1  # where the fragmented record under way began
    head = b""  # its first bytes: the WriteBatch's sequence and count
    while pos < size:
        room = BLOCK - pos % BLOCK
        if room < HEADER:  # the block's zero trailer
            pos += room
            continue
        if not any(data[pos : pos + HEADER]):  # preallocated space, never written
            break
        length = data[pos + 4] | data[pos + 5] << 8 if size - pos >= HEADER else 0
        kind = data[pos + 6] if size - pos >= HEADER else FULL
        header = RECYCLABLE_HEADER if kind in RECYCLABLE or kind in (11, 131) else HEADER
        if pos + header + length > size:  # the header or the fragment cut short
            if start < 0:
                start, head = pos, data[pos + header : pos + header + 12]
            return WalEnd(size - start, _seq(head) if len(head) >= 8 else next_seq)
        payload = data[pos + header : pos + header + length]
        kind = RECYCLABLE.get(kind, kind)
        if kind in (FULL, FIRST):
            start, head = pos, payload[:12]
        elif kind in (MIDDLE, LAST) and len(head) < 12:
            head += payload[: 12 - len(head)]
        if kind in (FULL, LAST) and len(head) >= 12:
            next_seq = _seq(head) + _le(head[8:12])
        if kind in (FULL, LAST) or kind in METADATA or kind & IGNORABLE:
            start, head = -1, b""
        pos += header + length
    if start >= 0:  # a FIRST (and MIDDLEs) with no LAST: the file ends inside the record
        return WalEnd(size - start, _seq(head) if len(head) >= 8 else next_seq)
    return WalEnd(0, None)


def _seq(head: bytes) -> int:
    return _le(head[:8])


@dataclass(frozen=True)
class TornTail:
    """The newest WAL's unsynced last record: what an open in tolerate mode drops."""

    wal: Path
    torn: int
    seq: int
    mark: int

    def describe(self, dropped: bool) -> str:
        """One line; ``dropped``: the open drops the record (a read-only one reads past
        it and leaves it to the next read-write open)."""
        what = "dropped" if dropped else "read up to (the next start drops)"
        return (
            f"{what} the last {self.torn} bytes of {self.wal}: a write cut short by a "
            f"crash (sequence {self.seq}, past every acknowledged write, {self.mark})"
        )


def crash_tail(store: Path) -> TornTail | None:
    """The newest WAL's torn last record when it is all that is wrong with the WALs and
    it was never acknowledged (its sequence past the mark); else None."""
    wals = sorted(store.glob("*.log"), key=lambda p: p.name)
    if not wals:
        return None
    *older, newest = wals
    if any(wal_end(p.read_bytes()).torn for p in older):
        return None
    end = wal_end(newest.read_bytes())
    mark = SyncedMark.read(store)
    if not end.torn or end.torn_seq is None or mark is None or end.torn_seq <= mark:
        return None
    return TornTail(newest, end.torn, end.torn_seq, mark)


class SyncedMark:
    """The store's mark: a sequence number at or past every acknowledged write, a
    checksummed state file (``state_file``'s format, the number zero-padded so every
    mark has one size) rewritten in place with one ``pwrite``, no fsync of its own. A
    kill leaves it in the page cache; a power cut may leave an older one, which only
    tolerates less."""

    def __init__(self, store: Path) -> None:
        self._fd = os.open(store / MARK_NAME, os.O_WRONLY | os.O_CREAT, 0o644)
        self._lock = threading.Lock()
        self._seq = SyncedMark.read(store) or 0

    @staticmethod
    def read(store: Path) -> int | None:
        """The mark; 0 for a store without one (made before marks, or its mark never
        written: nothing to tell by), None for one that does not read back whole (then
        no tail is taken as a crash's)."""
        path = store / MARK_NAME
        try:
            if path.stat().st_size == 0:
                return 0
            return state_file.read_int(path) or 0
        except FileNotFoundError:
            return 0
        except (OSError, state_file.BadStateFile):
            return None

    def advance(self, seq: int) -> None:
        """Every write up to ``seq`` is (or is about to be) acknowledged; ``OSError``
        where the mark could not be written whole (it then reads back as bad)."""
        with self._lock:
            if seq <= self._seq or self._fd < 0:
                return
            data = state_file.encode(b"%0*d" % (_DIGITS, seq))
            if os.pwrite(self._fd, data, 0) != len(data):
                raise OSError(f"a short write of {MARK_NAME}")
            self._seq = seq

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def _le(data: bytes) -> int:
    return int.from_bytes(data, "little")
