"""Durable cursors of SEGMENTED topics: Kafka's committed consumer-group offsets, with
the same shape as LEDGER cursors (``storage/cursor.py``: mark-delete position, ranges of
individually acknowledged offsets, ``delivered``, properties) so that Consume and
Acknowledge behave alike on both kinds.

Two files per topic directory::

    cursors.json      snapshot  {"format": 2, "generation": g,
                                 "cursors": {name: {head..., "ranges": [[l, e, l, e], ...]}}}
                      with a checksum line (``state_file.py``)
    cursors.journal   line 1: {"generation": g}; then one line per change:
                      "<crc32c hex> <json>", json = {"s": subscription, "h": head,
                      "r": [[l, e, l, e] (range written) or [l, e] (range removed), ...]}

A change appends one line (fsynced, so an acknowledged offset is on disk before
Acknowledge returns; a risen ``delivered`` goes with the next one), so an ack
costs O(log n) whatever the number of acked offsets. Once the journal holds more lines
than twice the state it describes, the state is written as a new snapshot of the next
generation and the journal restarts empty: replaying stays proportional to the state.
A crash between the two leaves a journal of an older generation, which the loader
ignores. A last line cut short (a crash mid-append: that ack was never answered; or a journal cut
while stopped) is dropped, logged in one line with what it held (``dropped``, which
``compactlog check`` reports too); a whole line that fails its CRC is damage, not a crash.
A journal cut exactly between two lines after a crash reads as a shorter history: nothing
in it can tell (a clean stop folds the journal, so a cut after one is a damaged header).
A snapshot written before the journal existed (format 1: each cursor's acked offsets
in a list ``acked``) is read and rewritten in this layout.

Both files are parsed strictly: a snapshot that fails its checksum or its shape, or a
damaged journal line before the last, is ``BadStateFile`` and the topic goes offline
(cursors read wrong would redeliver or skip acknowledged messages).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import crc32c

from compactlog.errors import CompactlogError, NotDelivered, SubscriptionNotFound, from_os_error
from compactlog.storage.cursor import Cursor, CursorChange, Successor, message_id
from compactlog.storage.segmented import state_file
from compactlog.storage.segmented.files import atomic_write, cut_back, write_all
from compactlog.storage.segmented.state_file import BadStateFile
from compactlog.storage.types import MessageId

log = logging.getLogger(__name__)

CURSORS_FILE = "cursors.json"
JOURNAL_FILE = "cursors.journal"
FORMAT = 2
JOURNAL_MIN_LINES = 4096  # a snapshot is never rewritten for fewer lines than this


def _encode_line(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return b"%08x " % crc32c.crc32c(body) + body + b"\n"


def _decode_line(line: bytes) -> dict[str, Any] | None:
    """A journal line's change, or None when the line is not whole and intact."""
    crc, _, body = line.rstrip(b"\n").partition(b" ")
    try:
        if not line.endswith(b"\n") or int(crc, 16) != crc32c.crc32c(body):
            return None
        obj = json.loads(body)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


_SUBSCRIPTION = re.compile(rb'"s":"((?:[^"\\]|\\.)*)"')


def _torn_line(number: int, line: bytes) -> str:
    """What a torn last journal line held, as far as its bytes say: the line, its size,
    the subscription it changed (when that much of it is there)."""
    found = _SUBSCRIPTION.search(line)
    whose = f"subscription {found.group(1).decode(errors='replace')!r}" if found else "a cursor"
    return (
        f"line {number}, {len(line)} bytes of a change of {whose} "
        "(not applied: acknowledged offsets it held are delivered again)"
    )


def _range(raw: object) -> tuple[MessageId, MessageId]:
    """A stored ``[ledger, entry, ledger, entry]`` range, strictly."""
    if not isinstance(raw, list) or len(raw) != 4:
        raise ValueError(f"not a range: {str(raw)[:40]}")
    start, end = message_id(raw[:2]), message_id(raw[2:])
    if start.ledger_id != end.ledger_id or start > end:
        raise ValueError(f"not a range: {str(raw)[:40]}")
    return start, end


def _apply_head(cursor: Cursor, head: dict[str, Any]) -> None:
    fresh = Cursor.from_head(cursor.name, head)
    cursor.mark_delete, cursor.delivered = fresh.mark_delete, fresh.delivered
    cursor.properties = fresh.properties
    cursor.read_position = fresh.mark_delete


class SegmentCursors:
    """The cursors of one topic directory. ``repair=False`` (``compactlog check``) only
    reads: a torn journal tail or a format-1 snapshot is not rewritten."""

    def __init__(self, directory: Path, repair: bool = True) -> None:
        self.path = directory / CURSORS_FILE
        self.journal = directory / JOURNAL_FILE
        self._lock = threading.Lock()
        self._cursors: dict[str, Cursor] = {}
        self._generation = 0
        self._lines = 0
        self._ready = False  # the journal exists and matches the snapshot's generation
        self.dropped: str | None = None  # what a journal cut short lost (``_torn_line``)
        if self._load() and repair:
            self._snapshot()

    # ---- loading ----------------------------------------------------------------------

    def _load(self) -> bool:
        """Read snapshot and journal; True when they should be rewritten at once."""
        body = state_file.read(self.path)
        try:
            return self._parse(json.loads(body) if body is not None else None)
        except (ValueError, TypeError, KeyError) as exc:
            raise BadStateFile(self.path, f"malformed cursors ({exc})") from None

    def _parse(self, data: object) -> bool:
        if data is None:
            return self._replay()
        if not isinstance(data, dict):
            raise ValueError("not an object of cursors")
        if data.get("format") != FORMAT:  # format 1: {name: {mark_delete, acked, properties}}
            for name, head in data.items():
                self._cursors[name] = Cursor.from_head(name, head)
            return True
        if set(data) != {"format", "generation", "cursors"} or type(data["generation"]) is not int:
            raise ValueError("not a cursors snapshot")
        self._generation = data["generation"]
        for name, state in dict(data["cursors"]).items():
            head = dict(state)
            ranges = head.pop("ranges")
            cursor = self._cursors[name] = Cursor.from_head(name, head)
            for item in ranges:
                cursor.acked.put(*_range(item))
        return self._replay()

    def _replay(self) -> bool:
        try:
            lines = self.journal.read_bytes().splitlines(keepends=True)
        except FileNotFoundError:
            return False
        header = _decode_line(lines[0]) if lines else None
        generation = header.get("generation") if header is not None else None
        if type(generation) is not int or generation > self._generation:
            raise BadStateFile(self.journal, "damaged header (or newer than cursors.json)")
        if generation < self._generation:
            return True  # a crash between the two writes of a snapshot: it holds these lines
        for number, line in enumerate(lines[1:], 2):
            change = _decode_line(line)
            if change is None:
                if number == len(lines) and not line.endswith(b"\n"):
                    self.dropped = _torn_line(number, line)
                    log.warning("%s: cut short: dropped %s", self.journal, self.dropped)
                    return True  # a crash mid-append: that ack was never answered
                raise BadStateFile(self.journal, f"line {number} is damaged")
            try:
                self._apply(change)
            except (ValueError, TypeError, KeyError) as exc:
                raise BadStateFile(self.journal, f"line {number} is malformed ({exc})") from None
        self._lines = len(lines) - 1
        self._ready = True
        return False

    def _apply(self, change: dict[str, Any]) -> None:
        name = change["s"]
        if not isinstance(name, str) or not set(change) <= {"s", "h", "r"}:
            raise ValueError("not a cursor change")
        cursor = self._cursors.get(name)
        if cursor is None:
            cursor = self._cursors[name] = Cursor(name)
        if "h" in change:
            _apply_head(cursor, change["h"])
        for item in change.get("r", ()):
            if isinstance(item, list) and len(item) == 2:
                cursor.acked.remove(message_id(item))
            else:
                cursor.acked.put(*_range(item))

    # ---- writing ----------------------------------------------------------------------

    def _snapshot(self) -> None:
        """The whole state as the next generation's snapshot, then an empty journal."""
        generation = self._generation + 1
        state = {
            name: {**c.head(), "ranges": [[*s, *e] for s, e in c.acked]}
            for name, c in self._cursors.items()
        }
        body = {"format": FORMAT, "generation": generation, "cursors": state}
        state_file.write(self.path, json.dumps(body, separators=(",", ":")).encode())
        atomic_write(self.journal, _encode_line({"generation": generation}))
        self._generation, self._lines, self._ready = generation, 0, True

    def _record(self, cursor: Cursor, change: CursorChange, sync: bool) -> None:
        """Make ``change`` (applied in memory already) durable: a journal line."""
        if not self._ready:  # no journal yet: the snapshot holds the change
            self._snapshot()
            return
        line: dict[str, Any] = {"s": cursor.name}
        if change.head:
            line["h"] = cursor.head()
        if change.ranges:
            line["r"] = [[*s] if e is None else [*s, *e] for s, e in change.ranges.items()]
        self._append(_encode_line(line), sync)
        self._lines += 1
        if self._lines > max(JOURNAL_MIN_LINES, 2 * self._size()):
            self._snapshot()

    def _append(self, data: bytes, sync: bool) -> None:
        """One journal line, whole or not at all: a write a full disk cuts short is cut
        back before anything else is appended (the change stays in memory only, so at
        worst it is delivered again after a restart) and raised as ours."""
        try:
            fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise from_os_error(exc, "recording a cursor change", self.journal) from None
        try:
            size = os.fstat(fd).st_size
            write_all(fd, data, size, "recording a cursor change", self.journal)
            if sync:
                try:
                    os.fsync(fd)
                except OSError as exc:
                    cut_back(fd, size, self.journal)
                    raise from_os_error(exc, "syncing a cursor change", self.journal) from None
        finally:
            os.close(fd)

    def close(self) -> None:
        """Fold the journal into a snapshot (a clean stop leaves an empty journal, so a
        journal found cut short after it is a damaged header, not a silently shorter
        history: the topic goes offline instead of acks being lost). Best effort: a
        snapshot the disk refuses leaves the journal as it was."""
        with self._lock:
            if not self._ready or not self._lines:
                return
            try:
                self._snapshot()
            except CompactlogError as exc:
                log.warning("%s: cursors not folded into a snapshot at close: %s", self.path, exc)

    def _size(self) -> int:
        return sum(1 + len(c.acked) for c in self._cursors.values())

    # ---- the cursors ------------------------------------------------------------------

    def open(
        self,
        subscription: str,
        initial_mark: MessageId | None,
        properties: dict[str, str] | None = None,
    ) -> Cursor:
        """The subscription's cursor, created at ``initial_mark`` (with ``properties``)
        on first use."""
        with self._lock:
            cursor = self._cursors.get(subscription)
            if cursor is None:
                cursor = Cursor(
                    subscription,
                    initial_mark,
                    properties=dict(properties or {}),
                    read_position=initial_mark,
                )
                cursor.delivered = initial_mark
                self._cursors[subscription] = cursor
                self._record(cursor, CursorChange(head=True), sync=True)
            return cursor

    def in_memory(self, subscription: str) -> Cursor | None:
        """The subscription's cursor, without the lock (a dictionary lookup); None when
        it is not open."""
        return self._cursors.get(subscription)

    def all(self) -> list[Cursor]:
        with self._lock:
            return [self._cursors[name] for name in sorted(self._cursors)]

    def _existing(self, subscription: str, topic: str) -> Cursor:
        cursor = self._cursors.get(subscription)
        if cursor is None:
            raise SubscriptionNotFound(
                f"subscription {subscription!r} does not exist"
                + (f" on {topic!r}" if topic else ""),
                topic=topic or None,
                subscription=subscription,
            )
        return cursor

    def delete(self, subscription: str, topic: str = "") -> None:
        """Drop a subscription: the journal has no line for that, so the state is written
        as a new snapshot without it (a rare, administrative change)."""
        with self._lock:
            self._existing(subscription, topic)
            del self._cursors[subscription]
            self._snapshot()

    def reset(self, subscription: str, mark: MessageId | None, topic: str = "") -> Cursor:
        """Reset the cursor to ``mark`` (``Cursor.reset``), synced before returning."""
        with self._lock:
            cursor = self._existing(subscription, topic)
            self._record(cursor, cursor.reset(mark), sync=True)
            return cursor

    def acknowledge(
        self,
        subscription: str,
        offset_id: MessageId,
        cumulative: bool,
        successor: Successor,
        exists: Callable[[MessageId], bool],
        topic: str = "",
    ) -> Cursor:
        with self._lock:
            cursor = self._existing(subscription, topic)
            try:
                if not cursor.check_delivered(offset_id, exists):
                    return cursor
            except NotDelivered as exc:
                if topic:
                    exc.metadata["topic"] = topic
                raise
            change = cursor.acknowledge(offset_id, cumulative, successor)
            if change:
                self._record(cursor, change, sync=True)
            return cursor

    def acknowledge_list(
        self,
        subscription: str,
        ids: Sequence[MessageId],
        successor: Successor,
        exists: Callable[[MessageId], bool],
        topic: str = "",
    ) -> Cursor:
        """Individual acks of ``ids``, each checked first (one never delivered:
        NOT_DELIVERED, nothing written), then one journal line for them all, synced."""
        with self._lock:
            cursor = self._existing(subscription, topic)
            try:
                fresh = cursor.check_list(ids, exists)
            except NotDelivered as exc:
                if topic:
                    exc.metadata["topic"] = topic
                raise
            change = cursor.acknowledge_list(fresh, successor)
            if change:
                self._record(cursor, change, sync=True)
            return cursor
