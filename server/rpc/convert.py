"""Protobuf ⇄ domain objects, and nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from compactlog.errors import MalformedRequest
from compactlog.server.broker import TopicDescription
from compactlog.storage.batch import id_runs
from compactlog.storage.types import MessageId, TopicKind
from compactlog.v1 import compactlog_pb2 as pb


def kind_from_pb(kind: int) -> TopicKind:
    """LEDGER when unspecified (CONTRACT section 2); a value the enum lacks is refused
    rather than read as the default (proto3 enums are open: any number parses)."""
    if kind == pb.SEGMENTED:
        return TopicKind.SEGMENTED
    if kind in (pb.LEDGER, pb.TOPIC_KIND_UNSPECIFIED):
        return TopicKind.LEDGER
    raise MalformedRequest(f"unknown topic kind {kind}", field="kind", value=kind)


def start_position(position: int) -> int:
    """A ``StartPosition`` a client sent, checked (open enums parse any number)."""
    if position not in (pb.EARLIEST, pb.LATEST):
        raise MalformedRequest(
            f"unknown start position {position}", field="position", value=position
        )
    return position


def id_to_pb(msg_id: MessageId, out: pb.MessageId | None = None) -> pb.MessageId:
    out = out if out is not None else pb.MessageId()
    out.ledger_id = msg_id.ledger_id
    out.entry_id = msg_id.entry_id
    return out


def id_from_pb(msg_id: pb.MessageId) -> MessageId:
    return MessageId(msg_id.ledger_id, msg_id.entry_id)


_tuple_new = tuple.__new__


def ids_from_pb(ids: Sequence[pb.MessageId]) -> list[MessageId]:
    """``id_from_pb`` of a request's list of ids (an AcknowledgeList's thousand): made
    as the tuples they are, without the named tuple's Python ``__new__`` for each."""
    return [_tuple_new(MessageId, (i.ledger_id, i.entry_id)) for i in ids]


def topic_info(desc: TopicDescription) -> pb.TopicInfo:
    info = pb.TopicInfo(
        name=desc.name, kind=cast("pb.TopicKind.ValueType", int(desc.kind)), config=desc.config
    )
    info.config_overrides.extend(desc.overrides)
    if desc.offline_reason:
        info.offline = True
        info.offline_reason = desc.offline_reason
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
    info.partitions = desc.partitions
    return info


def publish_reply(runs: Sequence[tuple[int, int, int]], synced: bool, partition: int = 0) -> bytes:
    """PublishResponse bytes for id runs (ledger, first entry, count), built by the batch
    codec: a reply of 1000 ids without 1000 protobuf objects. ``partition``: the ids'
    ``MessageId.partition`` (a publish straight to ``NAME-partition-i``)."""
    return id_runs(runs, partition) + (b"\x10\x01" if synced else b"")
