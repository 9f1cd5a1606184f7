"""VerifyCompaction: recompute the compacted ledger from the raw history and compare.

The check shares nothing with the compactor but the storage reads: it maps each key's
*bytes* (not a digest) to its latest raw position up to the horizon, selects the
expected winners (latest value of each key unless a tombstone; keyless messages when
``compaction.retain.null.key``; a tombstone the run kept for slow readers is accepted
where it is its key's latest message), and walks them beside the compacted ledger, message by
message, in canonical form. Where retention has already removed raw ledgers below the
horizon, the compacted entries older than the first raw entry left cannot be recomputed:
they are checked only for not being superseded by a later raw entry of their key.

The digest is a SHA-256 over the compacted view in a canonical encoding, independent of
how an engine serialised its protobuf (all integers big-endian)::

    "compactlog-view/1\\n"
    horizon   0x00                          no compacted ledger yet
              0x01 u64 ledger_id u64 entry_id
    then, for each message of the compacted ledger in order:
      u64 ledger_id  u64 entry_id
      key    0x00 (absent) | 0x01 u32 length bytes
      value  0x00 (absent) | 0x01 u32 length bytes
      u32 property count, then per property sorted by name: u32 length name, u32 length value
                                                            (UTF-8)
      i64 publish_time_ms  i64 event_time_ms

Equal views give equal digests whatever engine (local, Spark) wrote them.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from compactlog.compactor.two_phase.ledger_snapshot import CompactedView
from compactlog.compactor.two_phase.storage import CompactionReads, Segment
from compactlog.errors import CompactlogError
from compactlog.storage.codec import HAS_KEY, VALUE_NON_EMPTY
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

MAX_PROBLEMS = 20
DIGEST_HEADER = b"compactlog-view/1\n"
_IDS = struct.Struct(">QQ")
_LEN = struct.Struct(">I")
_TIMES = struct.Struct(">qq")


@dataclass
class Verification:
    ok: bool = True
    checked: int = 0
    digest: str = ""
    problems: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        self.ok = False
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
        elif len(self.problems) == MAX_PROBLEMS:
            self.problems.append("... (more problems not listed)")


def canonical(msg: pb.Message) -> bytes:
    """One message in the digest's encoding."""
    key, value, props = msg.key, msg.value, msg.properties
    parts = [
        _IDS.pack(msg.id.ledger_id, msg.id.entry_id),
        b"\x01" + _LEN.pack(len(key)) + key if msg.HasField("key") else b"\x00",
        b"\x01" + _LEN.pack(len(value)) + value if msg.HasField("value") else b"\x00",
        _LEN.pack(len(props)),
    ]
    if props:
        for name, text in sorted(props.items()):
            for data in (name.encode(), text.encode()):
                parts.append(_LEN.pack(len(data)) + data)
    parts.append(_TIMES.pack(msg.publish_time_ms, msg.event_time_ms))
    return b"".join(parts)


def view_digest(horizon: MessageId | None, messages: list[bytes]) -> str:
    """The digest of a compacted view given its messages in canonical form."""
    h = hashlib.sha256(DIGEST_HEADER)
    h.update(b"\x00" if horizon is None else b"\x01" + _IDS.pack(*horizon))
    for data in messages:
        h.update(data)
    return h.hexdigest()


def _id(msg: pb.Message) -> MessageId:
    return MessageId(msg.id.ledger_id, msg.id.entry_id)


def verify_view(storage: CompactionReads, view: CompactedView) -> Verification:
    """Compare the compacted ledger with the one recomputed from the raw history."""
    out = Verification()
    try:
        compacted = [pb.Message.FromString(d) for d in _entries(storage, view.ledger)]
        canon = [canonical(m) for m in compacted]
        out.digest = view_digest(view.horizon, canon)
        if view.ledger_id is None:
            return out
        latest, wins, first_raw = _raw_pass(storage, view)
        _compare(out, compacted, canon, _expected(storage, view.raw, wins), latest, first_raw)
    except CompactlogError as exc:
        out.problem(f"cannot read the topic: {exc}")
    return out


def _entries(storage: CompactionReads, segment: Segment | None) -> Iterator[bytes]:
    if segment is not None:
        for _eid, data in storage.read_entries(segment):
            yield data


Latest = dict[bytes, tuple[int, int, int]]  # key -> (ledger, entry, has a value) of its last


def _raw_pass(
    storage: CompactionReads, view: CompactedView
) -> tuple[Latest, list[bytearray], MessageId | None]:
    """One read of the raw keys up to the horizon: each key's latest message, and for each
    raw segment a bitmap (``entry - first_entry``) of the expected winners: the latest
    message of each key unless it is a tombstone, and the keyless ones when
    ``compaction.retain.null.key``. Also the first raw id left (retention)."""
    latest: Latest = {}
    wins = [bytearray((seg.length + 7) >> 3) for seg in view.raw]
    for seg, bits in zip(view.raw, wins, strict=True):
        lid, first = seg.ledger_id, seg.first_entry
        for eid, flags, _size, key in storage.read_keys(seg):
            if flags & HAS_KEY:
                latest[key] = (lid, eid, flags & VALUE_NON_EMPTY)  # type: ignore[index]
            elif view.retain_null_key:
                bits[(eid - first) >> 3] |= 1 << ((eid - first) & 7)
    # one raw segment a ledger (``tail_segments``)
    where = {s.ledger_id: (s.first_entry, bits) for s, bits in zip(view.raw, wins, strict=True)}
    for lid, eid, live in latest.values():
        if live:
            first, bits = where[lid]
            bits[(eid - first) >> 3] |= 1 << ((eid - first) & 7)
    first_raw = MessageId(view.raw[0].ledger_id, view.raw[0].first_entry) if view.raw else None
    return latest, wins, first_raw


def _expected(
    storage: CompactionReads, raw: tuple[Segment, ...], wins: list[bytearray]
) -> Iterator[pb.Message]:
    """The raw winners, in id order, as messages."""
    for seg, bits in zip(raw, wins, strict=True):
        if any(bits):
            for _eid, data in storage.read_entries(seg, bits):
                yield pb.Message.FromString(data)


def _latest_id(latest: Latest, key: bytes) -> tuple[int, int] | None:
    found = latest.get(key)
    return None if found is None else (found[0], found[1])


def _compare(
    out: Verification,
    compacted: list[pb.Message],
    canon: list[bytes],
    expected: Iterator[pb.Message],
    latest: Latest,
    first_raw: MessageId | None,
) -> None:
    at = 0
    # entries below the first raw id left: retention removed what they came from
    while at < len(compacted) and (first_raw is None or _id(compacted[at]) < first_raw):
        msg = compacted[at]
        if msg.HasField("key") and msg.key in latest:
            out.problem(f"entry {at} ({_id(msg)}): key {msg.key!r} has a later raw message")
        out.checked += 1
        at += 1
    want = next(expected, None)
    while want is not None or at < len(compacted):
        if want is None or (at < len(compacted) and _id(compacted[at]) < _id(want)):
            extra = compacted[at]
            if not _kept_tombstone(extra, latest):
                out.problem(f"unexpected: {_id(extra)} (key {_key(extra)}) is not a latest value")
            out.checked += 1
            at += 1
        elif at >= len(compacted) or _id(compacted[at]) > _id(want):
            out.problem(f"missing: {_id(want)} (key {_key(want)}) is not in the compacted ledger")
            want = next(expected, None)
        else:
            if canon[at] != canonical(want):
                out.problem(f"entry {at} ({_id(want)}): differs from the raw message")
            out.checked += 1
            at += 1
            want = next(expected, None)


def _key(msg: pb.Message) -> str:
    return repr(msg.key) if msg.HasField("key") else "none"


def _kept_tombstone(msg: pb.Message, latest: Latest) -> bool:
    """A tombstone that is its key's latest message: kept for slow readers (reader-aware
    retention, ``TombstoneRetention``), a legitimate part of the view."""
    is_tombstone = msg.HasField("key") and not (msg.HasField("value") and msg.value)
    return is_tombstone and _latest_id(latest, msg.key) == _id(msg)
