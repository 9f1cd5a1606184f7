"""Protobuf ⇄ domain objects, and nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from compactlog.server.broker import TopicDescription
from compactlog.storage.types import MessageId, Record, StoredMessage, TopicKind
from compactlog.v1 import compactlog_pb2 as pb


def kind_from_pb(kind: int) -> TopicKind:
    return TopicKind.SEGMENTED if kind == pb.SEGMENTED else TopicKind.LEDGER


def records_from_pb(records: object) -> list[Record]:
    out = []
    for r in records:  # type: ignore[attr-defined]
        out.append(
            Record(
                r.key if r.HasField("key") else None,
                r.value if r.HasField("value") else None,
                dict(r.properties) if r.properties else None,
                r.event_time_ms,
            )
        )
    return out


def id_to_pb(msg_id: MessageId, out: pb.MessageId | None = None) -> pb.MessageId:
    out = out if out is not None else pb.MessageId()
    out.ledger_id = msg_id.ledger_id
    out.entry_id = msg_id.entry_id
    return out


def id_from_pb(msg_id: pb.MessageId) -> MessageId:
    return MessageId(msg_id.ledger_id, msg_id.entry_id)


def fill_message(out: pb.Message, msg: StoredMessage) -> None:
    id_to_pb(msg.id, out.id)
    if msg.key is not None:
        out.key = msg.key
    if msg.value is not None:
        out.value = msg.value
    if msg.properties:
        out.properties.update(msg.properties)
    out.publish_time_ms = msg.publish_time_ms
    out.event_time_ms = msg.event_time_ms


def topic_info(desc: TopicDescription) -> pb.TopicInfo:
    info = pb.TopicInfo(
        name=desc.name, kind=cast("pb.TopicKind.ValueType", int(desc.kind)), config=desc.config
    )
    s = info.stats
    s.entries = desc.entries
    s.bytes = desc.bytes
    s.ledgers = desc.ledgers
    s.segments = desc.segments
    if desc.first_id is not None:
        id_to_pb(desc.first_id, s.first_id)
    if desc.last_id is not None:
        id_to_pb(desc.last_id, s.last_id)
    s.compacted_entries = desc.compacted_entries
    s.compacted_bytes = desc.compacted_bytes
    s.log_start_offset = desc.log_start_offset
    return info


_VARINT_1 = [bytes([i]) for i in range(128)]


def _varint(n: int) -> bytes:
    if n < 128:
        return _VARINT_1[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_id_runs(runs: Sequence[tuple[int, int, int]]) -> bytes:
    """Wire bytes of ``repeated MessageId ids = 1`` for runs (ledger, first entry, count):
    a publish reply of 1000 ids without 1000 protobuf objects."""
    parts = []
    for lid, first, count in runs:
        head = b"\x08" + _varint(lid) + b"\x10"
        for entry in range(first, first + count):
            body = head + _varint(entry)
            parts.append(b"\x0a" + _VARINT_1[len(body)] + body)
    return b"".join(parts)
