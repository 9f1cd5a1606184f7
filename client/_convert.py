"""protobuf ⇄ client values, in one place so the rest of the client never touches pb2 fields."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from compactlog.client.types import (
    CompactionProgress,
    CompactionRun,
    CompactionState,
    CompactionStatus,
    CompactionVerification,
    Message,
    MessageId,
    Record,
    TopicInfo,
    TopicKindName,
    TopicStats,
)
from compactlog.errors import InvalidArgument
from compactlog.v1 import compactlog_pb2 as pb

BytesLike = bytes | bytearray | memoryview | str | None
"""What a producer accepts for a key or value: ``str`` is sent as UTF-8, ``None`` as absent."""

RecordLike = (
    Record
    | tuple[BytesLike, BytesLike]
    | tuple[BytesLike, BytesLike, Mapping[str, str] | None]
    | tuple[BytesLike, BytesLike, Mapping[str, str] | None, int]
)
"""A ``Record`` or a plain ``(key, value[, properties[, event_time_ms]])`` tuple."""

MessageIdLike = MessageId | tuple[int, int] | Message

_KINDS: dict[str, pb.TopicKind.ValueType] = {"ledger": pb.LEDGER, "segmented": pb.SEGMENTED}
_KIND_NAMES: dict[int, TopicKindName] = {
    pb.TOPIC_KIND_UNSPECIFIED: "ledger",
    pb.LEDGER: "ledger",
    pb.SEGMENTED: "segmented",
}
_STATES: dict[int, CompactionState] = {
    pb.CompactionStatus.NOT_RUN: "NOT_RUN",
    pb.CompactionStatus.RUNNING: "RUNNING",
    pb.CompactionStatus.SUCCESS: "SUCCESS",
    pb.CompactionStatus.ERROR: "ERROR",
    pb.CompactionStatus.CANCELLED: "CANCELLED",
}


def to_bytes(data: BytesLike) -> bytes | None:
    """Keys and values: ``str`` → UTF-8, ``None`` stays absent (keyless / null value)."""
    if data is None:
        return None
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise InvalidArgument(f"keys and values must be bytes, str or None, not {type(data).__name__}")


def kind_to_pb(kind: str) -> pb.TopicKind.ValueType:
    try:
        return _KINDS[kind.lower()]
    except (KeyError, AttributeError):
        raise InvalidArgument(
            f"unknown topic kind {kind!r} (expected 'ledger' or 'segmented')"
        ) from None


def config_to_pb(config: Mapping[str, object] | None) -> dict[str, str]:
    """Config values go over the wire as strings; ``True`` becomes ``"true"`` as Kafka spells it."""
    out: dict[str, str] = {}
    for key, value in (config or {}).items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def record_to_pb(record: RecordLike) -> pb.Record:
    if not isinstance(record, Record):
        if not isinstance(record, tuple) or not 2 <= len(record) <= 4:
            raise InvalidArgument(
                "a record is a Record or a (key, value[, properties[, event_time_ms]]) tuple"
            )
        key_in, value_in, *rest = record
        properties = cast("Mapping[str, str] | None", rest[0] if rest else None)
        event_time_ms = cast(int, rest[1] if len(rest) > 1 else 0)
    else:
        key_in, value_in = record.key, record.value
        properties, event_time_ms = record.properties, record.event_time_ms
    msg = pb.Record(event_time_ms=int(event_time_ms))
    key = to_bytes(key_in)
    value = to_bytes(value_in)
    if key is not None:
        msg.key = key
    if value is not None:
        msg.value = value
    if properties:
        msg.properties.update({str(k): str(v) for k, v in properties.items()})
    return msg


def publish_request(topic: str, records: Iterable[RecordLike]) -> pb.PublishRequest:
    """The request for one batch. ``(bytes, bytes)`` pairs, the common case, take a fast
    path straight into the repeated field (no intermediate Record message)."""
    req = pb.PublishRequest(topic=topic)
    add = req.records.add
    append = req.records.append
    for r in records:
        if type(r) is tuple and len(r) == 2 and type(r[0]) is bytes and type(r[1]) is bytes:
            add(key=r[0], value=r[1])
        else:
            append(record_to_pb(r))
    return req


def id_to_pb(mid: MessageIdLike) -> pb.MessageId:
    if isinstance(mid, Message):
        wire = mid.wire_id()
        if wire is not None:  # as received: nothing to convert or check
            return wire
        mid = mid.id
    ledger, entry = mid
    if ledger < 0 or entry < 0:
        raise InvalidArgument(f"message ids are non-negative, got {ledger}:{entry}")
    # Pulsar's -1 ("not partitioned") is the wire's 0; a plain or shared pair has none.
    partition = max(mid.partition(), 0) if isinstance(mid, MessageId) else 0
    return pb.MessageId(ledger_id=int(ledger), entry_id=int(entry), partition=partition)


def id_from_pb(mid: pb.MessageId) -> MessageId:
    return MessageId._of_wire(mid.ledger_id, mid.entry_id, mid.partition)


def id_run(ids: Sequence[pb.MessageId], one_log: bool) -> tuple[int, int] | None:
    """``(ledger, first entry)`` when a Publish reply's ids are every entry of one ledger
    from the first on, as those of one log (a topic that is not partitioned) are when the
    first and last share a ledger and lie ``len - 1`` entries apart (they rise strictly in
    request order): the ids can then be made from the numbers alone, without reading each
    wire id (a third of the time). None otherwise."""
    count = len(ids)
    if not one_log or not count:
        return None
    first, last = ids[0], ids[count - 1]
    ledger, start = first.ledger_id, first.entry_id
    if ledger != last.ledger_id or last.entry_id - start != count - 1 or first.partition:
        return None
    return ledger, start


def ids_from_pb(ids: Sequence[pb.MessageId], one_log: bool) -> list[MessageId]:
    """A Publish reply's ids, in request order (made from ``id_run`` where they run)."""
    run = id_run(ids, one_log)
    if run is not None:
        ledger, start = run
        new = tuple.__new__
        return [new(MessageId, (ledger, e)) for e in range(start, start + len(ids))]
    return [MessageId._of_wire(i.ledger_id, i.entry_id, i.partition) for i in ids]


def message_from_pb(msg: pb.Message, topic: str = "") -> Message:
    """One wire message as a ``Message``, its fields converted when first asked."""
    return Message.of_wire(msg, topic)


def stats_from_pb(stats: pb.TopicStats) -> TopicStats:
    return TopicStats(
        entries=stats.entries,
        bytes=stats.bytes,
        ledgers=stats.ledgers,
        segments=stats.segments,
        first_id=id_from_pb(stats.first_id) if stats.HasField("first_id") else None,
        last_id=id_from_pb(stats.last_id) if stats.HasField("last_id") else None,
        compacted_entries=stats.compacted_entries,
        compacted_bytes=stats.compacted_bytes,
        log_start_offset=stats.log_start_offset,
    )


def topic_from_pb(info: pb.TopicInfo) -> TopicInfo:
    return TopicInfo(
        name=info.name,
        kind=_KIND_NAMES.get(info.kind, "ledger"),
        config=dict(sorted(info.config.items())),
        stats=stats_from_pb(info.stats),
        offline_reason=info.offline_reason if info.offline else "",
        partitions=info.partitions,
        overrides=tuple(sorted(info.config_overrides)),
    )


def run_from_pb(run: pb.CompactionRun) -> CompactionRun:
    return CompactionRun(
        read=run.read,
        kept=run.kept,
        removed=run.removed,
        tombstones=run.tombstones,
        keyless_dropped=run.keyless_dropped,
        bytes_in=run.bytes_in,
        bytes_out=run.bytes_out,
        duration_ms=run.duration_ms,
        engine=run.engine,
    )


def progress_from_pb(p: pb.CompactionProgress) -> CompactionProgress:
    return CompactionProgress(
        state=_STATES.get(p.state, "NOT_RUN"),
        phase=p.phase,
        done=p.done,
        total=p.total,
        bytes_read=p.bytes_read,
        bytes_written=p.bytes_written,
        elapsed_ms=p.elapsed_ms,
    )


def verification_from_pb(v: pb.VerifyCompactionResponse) -> CompactionVerification:
    return CompactionVerification(
        ok=v.ok,
        checked=v.checked,
        digest=v.digest,
        problems=tuple(v.problems),
        horizon=id_from_pb(v.horizon) if v.HasField("horizon") else None,
        compacted_ledger_id=v.compacted_ledger_id,
    )


def status_from_pb(status: pb.CompactionStatus) -> CompactionStatus:
    return CompactionStatus(
        state=_STATES.get(status.state, "NOT_RUN"),
        last_error=status.last_error,
        compacted_ledger_id=status.compacted_ledger_id,
        horizon=id_from_pb(status.horizon) if status.HasField("horizon") else None,
        last_run=run_from_pb(status.last_run) if status.HasField("last_run") else None,
    )
