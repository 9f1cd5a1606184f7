"""The front's log of open spanning publishes: the intent is written before any part.

Under partition placement a publish to ``NAME`` spanning several slots is several writes
in several stores; the front writes the request's parts here (durably) before it sends
any, deletes the intent once every part is stored, and sends an intent left by a crash
again (``server/front/spanning.py``). Why this makes the publish whole, and what the
spanning ids mean, is in docs/architecture.md ("The front room, module by module").

A RocksDB of the front's own, at ``<data dir>/front/intents``::

    b"I" spanning_id:u64 BE   -> parts     u32 count, then per part:
                                           u16 topic length | topic (UTF-8)
                                           u32 request length | PublishRequest bytes
    b"\\x00high"               -> u64 BE    the greatest spanning id ever issued
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from compactlog.errors import CompactlogError
from compactlog.storage.group_commit import GroupCommit
from compactlog.storage.rocks import Batch, RocksDB

INTENTS_DIR = Path("front") / "intents"
_HIGH_KEY = b"\x00high"
_U64 = struct.Struct(">Q")
_COUNT = struct.Struct(">I")
_TOPIC = struct.Struct(">H")
_REQUEST = struct.Struct(">I")


@dataclass(frozen=True)
class Intent:
    """An open spanning publish: its id and its parts, ``(partition topic, request)``."""

    txid: int
    parts: tuple[tuple[str, bytes], ...]


def encode_parts(parts: Sequence[tuple[str, bytes]]) -> bytes:
    out = [_COUNT.pack(len(parts))]
    for topic, request in parts:
        name = topic.encode("utf-8")
        out += [_TOPIC.pack(len(name)), name, _REQUEST.pack(len(request)), request]
    return b"".join(out)


def decode_parts(data: bytes) -> tuple[tuple[str, bytes], ...]:
    """The parts of a stored intent; ``ValueError`` when the bytes are not whole."""
    (count,), p = _COUNT.unpack_from(data), _COUNT.size
    parts = []
    for _ in range(count):
        (size,) = _TOPIC.unpack_from(data, p)
        p += _TOPIC.size
        topic = data[p : p + size].decode("utf-8")
        p += size
        (size,) = _REQUEST.unpack_from(data, p)
        p += _REQUEST.size
        if p + size > len(data):
            raise ValueError("intent record cut short")
        parts.append((topic, data[p : p + size]))
        p += size
    if p != len(data):
        raise ValueError(f"intent record has {len(data) - p} bytes past its parts")
    return tuple(parts)


def intent_key(txid: int) -> bytes:
    return b"I" + _U64.pack(txid)


class IntentLog:
    """Open spanning publishes, on disk and in memory (thread-safe)."""

    def __init__(self, data_dir: Path, fsync: bool) -> None:
        path = data_dir / INTENTS_DIR
        path.mkdir(parents=True, exist_ok=True)
        self.db = RocksDB(path)
        self.fsync = fsync
        self.group_commit = GroupCommit(self.db.sync_wal)
        self._lock = threading.Lock()
        high = self.db.get(_HIGH_KEY)
        self._high = _U64.unpack(high)[0] if high else 0
        self._open: dict[int, Intent] = {}
        for key, value in self.db.scan(b"I", b"J"):
            txid = _U64.unpack_from(key, 1)[0]
            try:
                self._open[txid] = Intent(txid, decode_parts(value))
            except (ValueError, UnicodeDecodeError, struct.error) as exc:
                self.close()
                raise CompactlogError(
                    f"the front's intent log {path} holds a damaged record of spanning "
                    f"publish {txid} ({exc}): its parts may be stored in part"
                ) from None

    def begin(self, parts: Sequence[tuple[str, bytes]]) -> Intent:
        """``write``, then wait until the record is as durable as a publish is
        (blocking: call it off the event loop)."""
        intent, ticket = self.write(parts)
        if ticket:
            self.group_commit.wait(ticket)
        return intent

    def write(self, parts: Sequence[tuple[str, bytes]]) -> tuple[Intent, int]:
        """Record a spanning publish's parts (in the WAL, not yet synced: quick); the
        group commit ticket to wait for (0: nothing to wait for, ``publish.durability =
        wal``)."""
        with self._lock:
            txid = max(self._high + 1, time.time_ns() // 1000)
            self._high = txid
            intent = Intent(txid, tuple(parts))
            batch = Batch()
            batch.put(intent_key(txid), encode_parts(intent.parts))
            batch.put(_HIGH_KEY, _U64.pack(txid))
            self.db.write(batch)
            self._open[txid] = intent
        return intent, self.group_commit.ticket() if self.fsync else 0

    def done(self, txid: int) -> None:
        """Every part is stored (or can never be): forget the intent (idempotent)."""
        with self._lock:
            if self._open.pop(txid, None) is None:
                return
            batch = Batch()
            batch.delete(intent_key(txid))
            self.db.write(batch)

    def floor(self) -> int:
        """No spanning publish below this id is open: the first open one, since ids are
        issued in increasing order and ``_open`` keeps the order they were added in (the
        ones loaded at start first, in key order)."""
        with self._lock:
            return next(iter(self._open), self._high + 1)

    def open_intents(self) -> list[Intent]:
        with self._lock:
            return sorted(self._open.values(), key=lambda intent: intent.txid)

    def close(self) -> None:
        self.group_commit.close()
        self.db.close()
