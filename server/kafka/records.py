"""Kafka's RecordBatch v2 to and from our stored batches, through aiokafka's codec.

A produced RecordBatch becomes the ``records`` of a ``PublishRequest``, so a Kafka
produce takes the gRPC Publish path; a
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

from collections.abc import Iterator
from typing import Any

from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from google.protobuf.message import DecodeError

from compactlog.errors import CorruptData
from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.storage import batch as codec
from compactlog.storage.read_range import ViewBatch
from compactlog.v1 import compactlog_pb2 as pb

MAX_BATCH_BYTES = 2**31 - 1
_BASE_OFFSET = slice(0, 8)  # outside the CRC: set after the batch is built


def produced_request(data: bytes) -> bytes:
    """The records of a Produce partition's ``records`` bytes as raw ``PublishRequest``
    bytes (records only), CRCs checked, batches decompressed; ``KafkaError`` when they are
    not RecordBatch v2 we can store. Built by protobuf's compiled encoder: the request
    ``storage.batch.records_to_request`` writes (``tests/storage/test_batch_codec`` holds
    the two alike), without its per-record Python encoding."""
    request = pb.PublishRequest()
    records = request.records
    for batch in _batches(data):
        for rec in batch:
            out = records.add()
            if rec.key is not None:
                out.key = rec.key
            if rec.value is not None:
                out.value = rec.value
            for name, raw in rec.headers:
                out.properties[name] = _header_text(name, raw)
            if rec.timestamp > 0:
                out.event_time_ms = rec.timestamp
    if not records:
        raise KafkaError(ErrorCode.invalid_record, "a produce with no records")
    return request.SerializeToString()


def _batches(data: bytes) -> Iterator[Any]:
    """The RecordBatch v2 of ``data``, each checked before its records are read."""
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
            yield batch
    except UnsupportedCodecError as exc:
        raise KafkaError(ErrorCode.unsupported_compression_type, str(exc)) from None
    except CorruptRecordException as exc:
        raise KafkaError(ErrorCode.corrupt_message, str(exc)) from None


def _header_text(name: str, raw: bytes | None) -> str:
    try:
        return (raw or b"").decode()
    except UnicodeDecodeError:
        raise KafkaError(
            ErrorCode.invalid_record, f"header {name!r}: properties are UTF-8 text"
        ) from None


def fetched_batch(stored: ViewBatch, start: int, where: str) -> tuple[bytes, int] | None:
    """The records of a stored batch at offsets ``>= start`` as one RecordBatch v2, and
    the last offset in it; None when none are left.

    The stored payload is a ``ReadResponse``'s ``messages`` field as it is (the batch
    codec's promise), so protobuf's compiled parser reads the whole batch at once: record
    by record in Python (``storage.message_decode``) this was most of a fetch's time."""
    data, header, _first = stored
    try:
        messages = pb.ReadResponse.FromString(bytes(codec.payload_of(data, header))).messages
    except DecodeError as exc:
        raise CorruptData(f"{where}: a stored batch does not parse: {exc}") from None
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, MAX_BATCH_BYTES)
    base = last = -1
    for msg in messages:
        entry = msg.id.entry_id
        if entry < start:
            continue
        if base < 0:
            base = entry
        headers = [(name, value.encode()) for name, value in msg.properties.items()]
        stamp = msg.event_time_ms or msg.publish_time_ms
        key = msg.key if msg.HasField("key") else None
        value = msg.value if msg.HasField("value") else None
        builder.append(entry - base, stamp, key, value, headers)  # type: ignore[arg-type]
        last = entry
    if base < 0:
        return None
    out = builder.build()
    out[_BASE_OFFSET] = base.to_bytes(8, "big", signed=True)
    return bytes(out), last
