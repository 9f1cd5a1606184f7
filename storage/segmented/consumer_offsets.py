"""Durable cursors of SEGMENTED topics: Kafka's committed consumer-group offsets, with
the same shape as LEDGER cursors (mark-delete position, individually acknowledged
offsets, properties) so that Consume and Acknowledge behave alike on both kinds.

One file per topic, ``cursors.json``, replaced atomically (temp + fsync + rename) on
every change: an acknowledged offset is on disk before Acknowledge returns. It carries a
checksum (``state_file.py``) and is parsed strictly: a file that fails is
``BadStateFile`` and the topic goes offline (cursors read wrong would redeliver or skip
acknowledged messages).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from compactlog.errors import SubscriptionNotFound
from compactlog.storage.cursor import Cursor
from compactlog.storage.segmented import state_file
from compactlog.storage.segmented.state_file import BadStateFile
from compactlog.storage.types import MessageId

CURSORS_FILE = "cursors.json"


class SegmentCursors:
    def __init__(self, directory: Path) -> None:
        self.path = directory / CURSORS_FILE
        self._lock = threading.Lock()
        self._cursors: dict[str, Cursor] = {}
        body = state_file.read(self.path)
        if body is not None:
            try:
                stored = json.loads(body)
                if not isinstance(stored, dict):
                    raise ValueError("not an object of cursors")
                for name, obj in stored.items():
                    self._cursors[name] = Cursor.decode(name, json.dumps(obj).encode())
            except ValueError as exc:
                raise BadStateFile(self.path, f"malformed cursors ({exc})") from None

    def open(self, subscription: str, initial_mark: MessageId | None) -> Cursor:
        """The subscription's cursor, created at ``initial_mark`` on first use."""
        with self._lock:
            cursor = self._cursors.get(subscription)
            if cursor is None:
                cursor = Cursor(subscription, initial_mark, read_position=initial_mark)
                self._cursors[subscription] = cursor
                self._persist()
            return cursor

    def acknowledge(
        self,
        subscription: str,
        offset_id: MessageId,
        cumulative: bool,
        successor: Callable[[MessageId | None], MessageId | None],
    ) -> Cursor:
        with self._lock:
            cursor = self._cursors.get(subscription)
            if cursor is None:
                raise SubscriptionNotFound(f"subscription {subscription!r} does not exist")
            cursor.acknowledge(offset_id, cumulative, successor)
            self._persist()
            return cursor

    def _persist(self) -> None:
        data = {name: json.loads(c.encode()) for name, c in self._cursors.items()}
        state_file.write(self.path, json.dumps(data, separators=(",", ":")).encode())
