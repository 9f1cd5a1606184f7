"""Kafka's RecordBatch v2 to and from our stored batches, through aiokafka's codec.

A produced RecordBatch becomes the ``records`` of a ``PublishRequest``
(``storage.batch.records_to_request``), so a Kafka produce takes the gRPC Publish path; a
fetch converts each stored batch to one uncompressed RecordBatch v2 at read time. How
fields map is in docs/kafka.md ("Mapping", "Inside the listener").

Kafka's RecordBatch v2 (big-endian; the CRC-32C covers attributes .. the end)::

    base offset i64 | length i32 | leader epoch i32 | magic i8 (2) | crc u32
    attributes i16 (bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control)
    last offset delta i32 | first timestamp i64 | max timestamp i64
    producer id i64 | producer epoch i16 | base sequence i32 | count i32 | records
    record: length varint | attrs i8 | timestamp delta varlong | offset delta varint
            key varbytes (-1: null) | value varbytes (-1: null) | headers [key, value]
"""

from __future__ import annotations

from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords

from compactlog.records import Record
from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.storage import batch as codec
from compactlog.storage.read_range import ViewBatch

MAX_BATCH_BYTES = 2**31 - 1
_BASE_OFFSET = slice(0, 8)  # outside the CRC: set after the batch is built


def produced_records(data: bytes) -> list[Record]:
    """The records of a Produce partition's ``records`` bytes, CRCs checked, batches
    decompressed. ``KafkaError`` when they are not RecordBatch v2 we can store."""
    records: list[Record] = []
    try:
        batches = MemoryRecords(data)
        while batches.has_next():
            batch = batches.next_batch()
            if batch is None:
                break
            if batch.magic != 2:
                raise KafkaError(ErrorCode.unsupported_version, "record batches before v2")
            if not batch.validate_crc():
                raise KafkaError(ErrorCode.corrupt_message, "record batch CRC-32C mismatch")
            if batch.is_transactional or batch.is_control_batch:
                raise KafkaError(
                    ErrorCode.invalid_record, "transactional batches are not supported"
                )
            records.extend(_record(rec.key, rec.value, rec.headers, rec.timestamp) for rec in batch)
    except UnsupportedCodecError as exc:
        raise KafkaError(ErrorCode.unsupported_compression_type, str(exc)) from None
    except CorruptRecordException as exc:
        raise KafkaError(ErrorCode.corrupt_message, str(exc)) from None
    if not records:
        raise KafkaError(ErrorCode.invalid_record, "a produce with no records")
    return records


def _record(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]], ts: int
) -> Record:
    properties: dict[str, str] = {}
    for name, raw in headers:
        try:
            properties[name] = (raw or b"").decode()
        except UnicodeDecodeError:
            raise KafkaError(
                ErrorCode.invalid_record, f"header {name!r}: properties are UTF-8 text"
            ) from None
    return Record(key, value, properties or None, max(ts, 0))


def fetched_batch(stored: ViewBatch, start: int, where: str) -> tuple[bytes, int] | None:
    """The records of a stored batch at offsets ``>= start`` as one RecordBatch v2, and
    the last offset in it; None when none are left."""
    data, header, _first = stored
    payload = codec.payload_of(data, header)
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, MAX_BATCH_BYTES)
    base = last = -1
    for _ledger, entry, *_rest, begin, end in codec.walk(payload, where):
        if entry < start:
            continue
        msg = codec.decode_message(bytes(payload[begin:end]))
        if base < 0:
            base = entry
        headers = [(name, value.encode()) for name, value in msg.properties.items()]
        stamp = msg.event_time_ms or msg.publish_time_ms
        builder.append(entry - base, stamp, msg.key, msg.value, headers)  # type: ignore[arg-type]
        last = entry
    if base < 0:
        return None
    out = builder.build()
    out[_BASE_OFFSET] = base.to_bytes(8, "big", signed=True)
    return bytes(out), last
