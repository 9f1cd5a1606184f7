"""Kafka's RecordBatch v2 to and from our stored batches, in a compiled twin.

A produced RecordBatch becomes the ``records`` of a ``PublishRequest``, so a Kafka
produce takes the gRPC Publish path; a fetch converts each stored batch to one
uncompressed RecordBatch v2 at read time, a partition's batches in one call. The
per-record work is ``_records.c``, with a pure-Python twin, ``_records_py.py``
(aiokafka's codec, record by record) of the same results, used where no compiler was
present at install: chosen here at import as ``storage.batch`` chooses its own. How
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

from collections.abc import Callable, Sequence

from aiokafka.codec import gzip_decode, lz4_decode, snappy_decode, zstd_decode

from compactlog.errors import CorruptData
from compactlog.server.kafka import _records_py
from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.storage import batch as codec
from compactlog.storage.read_range import ViewBatch
from compactlog.twins import load_twin

twin, COMPILED = load_twin("compactlog.server.kafka._records", _records_py)

# Kafka's compression codecs (attributes bits 0-2), decoded by aiokafka's codec (cramjam).
_DECODERS: dict[int, tuple[str, Callable[[bytes], bytes]]] = {
    1: ("gzip", gzip_decode),
    2: ("snappy", snappy_decode),
    3: ("lz4", lz4_decode),
    4: ("zstd", zstd_decode),
}


def decompress(codec_id: int, data: bytes) -> bytes:
    """A compressed batch's records, uncompressed; ``KafkaError`` when they are not."""
    if codec_id not in _DECODERS:
        raise KafkaError(
            ErrorCode.unsupported_compression_type, f"unknown compression codec {codec_id}"
        )
    name, decode = _DECODERS[codec_id]
    try:
        return bytes(decode(data))
    except Exception as exc:  # each library raises its own kind for bad input
        raise KafkaError(
            ErrorCode.corrupt_message, f"a {name} record batch does not decompress: {exc}"
        ) from None


def produced_request(data: bytes) -> bytes:
    """The records of a Produce partition's ``records`` bytes as raw ``PublishRequest``
    bytes (records only), CRCs checked, batches decompressed; ``KafkaError`` when they are
    not RecordBatch v2 we can store."""
    return bytes(twin.produced_request(data, decompress))


def fetched_records(
    stored: Sequence[ViewBatch], start: int, limit: int, first: bool, where: str
) -> tuple[memoryview, int, int]:
    """The records of stored batches at offsets ``>= start`` as RecordBatch v2, one per
    stored batch, while they fit ``limit`` bytes (the first always when ``first``), how
    many stored batches were done and the last offset given (-1: none): one compiled call
    for a Fetch partition's batches.

    The stored payload is a ``ReadResponse``'s ``messages`` field as it is (the batch
    codec's promise): the twin reads its records in place and writes Kafka's, without
    the GIL. The answer is a read-only view of the bytes the twin wrote (the compiled
    twin's own block, not copied into a ``bytes``): a Fetch's records reach the socket
    as they are (``protocol.encode_frame``)."""
    payloads = [codec.payload_of(data, header) for data, header, _first in stored]
    try:
        data, used, last = twin.fetched_batches(payloads, start, limit, first)
    except codec.MalformedPayload as exc:
        raise CorruptData(f"{where}: a stored batch does not parse: {exc}") from None
    return memoryview(data), int(used), int(last)
