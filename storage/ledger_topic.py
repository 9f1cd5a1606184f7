"""In-memory state of one LEDGER topic: its ledger list, the last confirmed id and
its cursors, guarded by one lock (appends to a topic are serialised; readers copy
what they need under the lock and scan RocksDB outside it). A confirmed append is
announced through ``changed`` so that waiting readers wake.

A topic's *incarnation* tells it apart from an earlier topic of the same name (deleted
and created again): the store's next ledger id when the topic was created, so every ledger
of this topic (raw or compacted) has an id at or above it and every ledger of an earlier
one an id below. Two topics of a name share an incarnation only when the earlier one never
owned a ledger, and then no compaction of it has anything to commit. A compaction commit
checks it (``ledger_adapter``). Topics created before incarnations existed have 0."""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Callable

from compactlog.storage.codec import LedgerMeta
from compactlog.storage.config import LedgerTopicConfig
from compactlog.storage.cursor import COMPACTED_LEDGER_PROPERTY, COMPACTION_SUBSCRIPTION, Cursor
from compactlog.storage.types import MessageId, TopicKind


class LedgerTopic:
    def __init__(
        self,
        name: str,
        overrides: dict[str, str],
        effective: dict[str, str],
        config: LedgerTopicConfig,
        changed: Callable[[str], None] = lambda _name: None,
        incarnation: int = 0,
    ) -> None:
        self.name = name
        self.incarnation = incarnation
        self.overrides = overrides
        self.effective = effective
        self.config = config
        self.ledgers: list[LedgerMeta] = []
        self.current: LedgerMeta | None = None
        self.lac: MessageId | None = None  # last confirmed (durable, visible) id
        self.cursors: dict[str, Cursor] = {}
        self.lock = threading.RLock()
        self.changed = changed  # tells waiting readers (ChangeListeners.notify)
        self.deleted = False
        self.closed = False
        self._ids: list[int] = []

    def record(self) -> bytes:
        return json.dumps(
            {
                "kind": int(TopicKind.LEDGER),
                "overrides": self.overrides,
                "ledgers": [led.ledger_id for led in self.ledgers],
                "incarnation": self.incarnation,
            },
            separators=(",", ":"),
        ).encode()

    @staticmethod
    def parse_record(data: bytes) -> tuple[dict[str, str], list[int], int]:
        """``(overrides, ledger ids, incarnation)`` of a stored topic record, strictly:
        anything but the shape ``record`` writes is ``ValueError`` (records written before
        incarnations existed have none: 0)."""
        obj = json.loads(data)
        fields = {"kind", "overrides", "ledgers"}
        if not isinstance(obj, dict) or set(obj) - {"incarnation"} != fields:
            raise ValueError("topic record is not an object of kind, overrides, ledgers")
        incarnation = obj.get("incarnation", 0)
        if type(incarnation) is not int or not 0 <= incarnation < 2**64:
            raise ValueError("topic incarnation is not a ledger id")
        if obj["kind"] != int(TopicKind.LEDGER):
            raise ValueError(f"topic record has kind {str(obj['kind'])[:20]}")
        overrides, ledgers = obj["overrides"], obj["ledgers"]
        if not isinstance(overrides, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in overrides.items()
        ):
            raise ValueError("topic overrides are not a map of strings")
        if not isinstance(ledgers, list) or not all(
            type(lid) is int and 0 < lid < 2**64 for lid in ledgers
        ):
            raise ValueError("topic ledgers are not a list of ledger ids")
        if ledgers != sorted(set(ledgers)):
            raise ValueError("topic ledgers are not ascending")
        return dict(overrides), list(ledgers), incarnation

    def recompute_positions(self) -> None:
        self._ids = [led.ledger_id for led in self.ledgers]
        self.current = self.ledgers[-1] if self.ledgers and not self.ledgers[-1].sealed else None
        self.lac = None
        for led in reversed(self.ledgers):
            if led.entries:
                self.lac = MessageId(led.ledger_id, led.entries - 1)
                break

    def add_ledger(self, meta: LedgerMeta) -> None:
        self.ledgers.append(meta)
        self._ids.append(meta.ledger_id)
        self.current = meta

    def undo_point(self) -> tuple[int, list[tuple[LedgerMeta, bool, int, int, int, int]]]:
        """What an append may change, to restore if its write fails."""
        return len(self.ledgers), [
            (led, led.sealed, led.entries, led.bytes, led.first_publish_ms, led.last_publish_ms)
            for led in self.ledgers[-1:]
        ]

    def rollback(
        self, point: tuple[int, list[tuple[LedgerMeta, bool, int, int, int, int]]]
    ) -> None:
        count, saved = point
        del self.ledgers[count:]
        for led, sealed, entries, nbytes, first_ms, last_ms in saved:
            led.sealed, led.entries, led.bytes = sealed, entries, nbytes
            led.first_publish_ms, led.last_publish_ms = first_ms, last_ms
        lac = self.lac  # readers saw only confirmed ids: those stay as they were
        self.recompute_positions()
        self.lac = lac

    def confirm(self, last: MessageId) -> None:
        """Make ids up to ``last`` visible to readers and wake followers."""
        if self.lac is None or last > self.lac:
            self.lac = last
        self.changed(self.name)

    def first_id(self) -> MessageId | None:
        for led in self.ledgers:
            if led.entries:
                return MessageId(led.ledger_id, 0)
        return None

    def ledgers_between(self, start: MessageId, stop: MessageId) -> list[LedgerMeta]:
        with self.lock:
            lo = bisect.bisect_left(self._ids, start.ledger_id)
            hi = bisect.bisect_right(self._ids, stop.ledger_id)
            return [led for led in self.ledgers[lo:hi] if led.entries]

    def holds(self, msg_id: MessageId) -> bool:
        """``msg_id`` is an entry of one of the topic's raw ledgers."""
        i = bisect.bisect_left(self._ids, msg_id.ledger_id)
        return (
            i < len(self._ids)
            and self._ids[i] == msg_id.ledger_id
            and msg_id.entry_id < self.ledgers[i].entries
        )

    def successor(self, msg_id: MessageId | None) -> MessageId | None:
        """The next stored id after msg_id (None: the first), or None at the end."""
        if msg_id is None:
            return self.first_id()
        i = bisect.bisect_left(self._ids, msg_id.ledger_id)
        if (
            i < len(self.ledgers)
            and self._ids[i] == msg_id.ledger_id
            and msg_id.entry_id + 1 < self.ledgers[i].entries
        ):
            return MessageId(msg_id.ledger_id, msg_id.entry_id + 1)
        for led in self.ledgers[i:]:
            if led.ledger_id > msg_id.ledger_id and led.entries:
                return MessageId(led.ledger_id, 0)
        return None

    def predecessor(self, msg_id: MessageId) -> MessageId | None:
        """The last stored id before ``msg_id`` (None: there is none), the mark-delete
        position from which delivery starts at ``msg_id``."""
        if msg_id.entry_id > 0:  # an id past its ledger's end works as well (successor)
            return MessageId(msg_id.ledger_id, msg_id.entry_id - 1)
        before = bisect.bisect_left(self._ids, msg_id.ledger_id)
        for led in reversed(self.ledgers[:before]):
            if led.entries:
                return MessageId(led.ledger_id, led.entries - 1)
        return None

    def compacted_ledger_id(self) -> int | None:
        cursor = self.cursors.get(COMPACTION_SUBSCRIPTION)
        if cursor is None or COMPACTED_LEDGER_PROPERTY not in cursor.properties:
            return None
        return int(cursor.properties[COMPACTED_LEDGER_PROPERTY])

    def stats(self) -> tuple[int, int]:
        return sum(led.entries for led in self.ledgers), sum(led.bytes for led in self.ledgers)
