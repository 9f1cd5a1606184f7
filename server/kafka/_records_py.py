"""Pure-Python twin of ``_records.c``: Kafka's RecordBatch v2 to and from our stored batches
through aiokafka's codec, record by record.

What an install without a C compiler runs (``records`` chooses the twin at import;
``COMPACTLOG_NO_EXT=1`` asks for this one). Both twins give the same results
(``tests/kafka/test_records_twins.py``): ``produced_request`` the same ``PublishRequest``,
``fetched_batches`` the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from google.protobuf.message import DecodeError

from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.storage import _batch_py
from compactlog.storage.message_decode import decode_message
from compactlog.v1 import compactlog_pb2 as pb

MAX_BATCH_BYTES = 2**31 - 1
_BASE_OFFSET = slice(0, 8)  # outside the CRC: set after the batch is built


def produced_request(data: bytes, decompress: Callable[[int, bytes], bytes]) -> bytes:
    """The records of a Produce partition's ``records`` bytes as raw ``PublishRequest``
    bytes (records only), CRCs checked, batches decompressed (by aiokafka's reader here:
    ``decompress`` is the compiled twin's way); ``KafkaError`` when they are not
    RecordBatch v2 we can store."""
    del decompress
    request = pb.PublishRequest()
    records = request.records
    try:
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
    except UnsupportedCodecError as exc:
        raise KafkaError(ErrorCode.unsupported_compression_type, str(exc)) from None
    except CorruptRecordException as exc:  # raised while a batch's records are read too
        raise KafkaError(ErrorCode.corrupt_message, str(exc)) from None
    except UnicodeDecodeError:
        raise KafkaError(
            ErrorCode.invalid_record, "a header name: properties are UTF-8 text"
        ) from None
    if not records:
        raise KafkaError(ErrorCode.invalid_record, "a produce with no records")
    return request.SerializeToString()


def _batches(data: bytes) -> Iterator[Any]:
    """The RecordBatch v2 of ``data``, each checked before its records are read."""
    batches = MemoryRecords(data)
    while batches.has_next():
        batch = batches.next_batch()
        if batch is None:
            break
        if getattr(batch, "magic", 0) != 2:  # aiokafka's older batches have none
            raise KafkaError(ErrorCode.unsupported_version, "record batches before v2")
        if not batch.validate_crc():
            raise KafkaError(ErrorCode.corrupt_message, "record batch CRC-32C mismatch")
        if batch.is_transactional or batch.is_control_batch:
            raise KafkaError(ErrorCode.invalid_record, "transactional batches are not supported")
        yield batch


def _header_text(name: str, raw: bytes | None) -> str:
    try:
        return (raw or b"").decode()
    except UnicodeDecodeError:
        raise KafkaError(
            ErrorCode.invalid_record, f"header {name!r}: properties are UTF-8 text"
        ) from None


def fetched_batches(
    payloads: Sequence[bytes | memoryview], start: int, limit: int, first: bool
) -> tuple[bytes, int, int]:
    """The records of stored payloads at offsets ``>= start`` as RecordBatch v2, one batch
    a payload, in order while they fit ``limit`` bytes (the first batch always when
    ``first``: Kafka's rule for a Fetch's first data); with how many payloads were done
    (converted, or with no record left) and the last offset given (-1: none).
    ``MalformedPayload`` when a payload does not parse."""
    out: list[bytes] = []
    size, last = 0, -1
    for used, payload in enumerate(payloads):
        converted = _fetched_batch(payload, start)
        if converted is None:
            continue
        data, end = converted
        if size + len(data) > limit and not (first and not out):
            return b"".join(out), used, last
        out.append(data)
        size, last = size + len(data), end
    return b"".join(out), len(payloads), last


def _fetched_batch(payload: bytes | memoryview, start: int) -> tuple[bytes, int] | None:
    """The records of a stored payload at offsets ``>= start`` as one RecordBatch v2, and
    the last offset in it; None when none are left. ``MalformedPayload`` when the payload
    does not parse.

    The payload is a ``ReadResponse``'s ``messages`` field as it is (the batch codec's
    promise), so protobuf's compiled parser reads it whole; only a message with several
    properties is read again (``decode_message``) for their stored order, which protobuf's
    maps do not keep and the compiled twin gives."""
    data = bytes(payload)
    try:
        messages = pb.ReadResponse.FromString(data).messages
    except DecodeError as exc:
        raise _batch_py.MalformedPayload(str(exc)) from None
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, MAX_BATCH_BYTES)
    base = last = -1
    walked: list[tuple[int, int, int, bytes | None, int, int]] | None = None
    for index, msg in enumerate(messages):
        entry = msg.id.entry_id
        if entry < start:
            continue
        if base < 0:
            base = entry
        properties = msg.properties
        if len(properties) > 1:
            walked = walked or _batch_py.walk(data)
            begin, end = walked[index][4:]
            properties = decode_message(data[begin:end]).properties  # type: ignore[assignment]
        headers = [(name, value.encode()) for name, value in properties.items()]
        stamp = msg.event_time_ms or msg.publish_time_ms
        key = msg.key if msg.HasField("key") else None
        value = msg.value if msg.HasField("value") else None
        builder.append(entry - base, stamp, key, value, headers)
        last = entry
    if base < 0:
        return None
    out = builder.build()
    out[_BASE_OFFSET] = base.to_bytes(8, "big", signed=True)
    return bytes(out), last
