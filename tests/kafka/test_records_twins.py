"""Kafka record conversion: ``server/kafka/records.py`` and its two twins, ``_records.c`` and
``_records_py.py`` (aiokafka's codec, record by record).

Fetch: the same stored payloads (null keys and values, properties, event time or publish
time, ids with gaps and partitions, a start inside the batch) give the same bytes from
both twins, and aiokafka's reader reads back what was stored. Produce: the same Kafka
batches (uncompressed and each codec) give the same ``PublishRequest``; bad batches are
refused by both with the same Kafka error code.
"""

from __future__ import annotations

import importlib
import os
import struct
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.errors import CorruptData
from compactlog.server.kafka import _records_py, records
from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.storage import batch
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

FAST = settings(max_examples=80, deadline=None)
ANY_SIZE = 2**31 - 1
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
BYTES = st.binary(max_size=40)
RECORDS = st.lists(
    st.builds(
        pb.Record,
        key=st.none() | BYTES,
        value=st.none() | BYTES,
        properties=st.dictionaries(TEXT, TEXT, max_size=3),
        event_time_ms=st.just(0) | st.integers(1, 2**45),
    ),
    min_size=1,
    max_size=12,
)


def _compiled() -> ModuleType:
    if records.COMPILED:
        return importlib.import_module("compactlog.server.kafka._records")
    if os.environ.get("COMPACTLOG_NO_EXT") == "1":
        pytest.skip("COMPACTLOG_NO_EXT=1: installed without the compiled twin")
    pytest.fail("compactlog.server.kafka._records is not built: run `pip install -e .`")


@pytest.fixture(scope="module")
def compiled() -> Iterator[ModuleType]:
    yield _compiled()


# ---- fetch ---------------------------------------------------------------------------


def stored_payload(recs: list[pb.Record], first: int, publish: int, keep: list[bool]) -> bytes:
    """The payload the store keeps for ``recs`` from offset ``first``, with the records
    ``keep`` says no left out (a cleaned batch: ids ascend with gaps)."""
    raw = pb.PublishRequest(records=recs).SerializeToString()
    run = batch.encode_request(raw, 0, 0, first, publish, partition=first % 3)
    walked = batch.walk(run.payload, "test")
    return b"".join(run.payload[s:e] for (*_r, s, e), k in zip(walked, keep, strict=True) if k)


def _expected(recs: list[pb.Record], first: int, publish: int, keep: list[bool], start: int):
    return [
        (first + i, r, r.event_time_ms or publish)
        for i, (r, k) in enumerate(zip(recs, keep, strict=True))
        if k and first + i >= start
    ]


@FAST
@given(
    recs=RECORDS,
    first=st.integers(0, 2**40),
    publish=st.integers(1, 2**45),
    keep_seed=st.lists(st.booleans(), min_size=12, max_size=12),
    skip=st.integers(0, 13),
)
def test_both_twins_fetch_the_same_bytes(
    compiled: ModuleType,
    recs: list[pb.Record],
    first: int,
    publish: int,
    keep_seed: list[bool],
    skip: int,
) -> None:
    keep = [k or i == 0 for i, k in enumerate(keep_seed[: len(recs)])]
    payload = stored_payload(recs, first, publish, keep)
    start = first + skip
    got = compiled.fetched_batches([payload], start, ANY_SIZE, False)
    assert got == _records_py.fetched_batches([payload], start, ANY_SIZE, False)
    assert compiled.fetched_batches([memoryview(payload)], start, ANY_SIZE, False) == got
    want = _expected(recs, first, publish, keep, start)
    data, used, last = got
    assert used == 1
    if not want:
        assert (data, last) == (b"", -1)
        return
    assert last == want[-1][0]
    kafka = DefaultRecordBatch(data)
    assert kafka.validate_crc() and kafka.base_offset == want[0][0]
    assert kafka.next_offset == last + 1 and not kafka.compression_type
    read = list(kafka)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in read] == [
        (o, r.key if r.HasField("key") else None, r.value if r.HasField("value") else None, t)
        for o, r, t in want
    ]
    assert [dict(r.headers) for r in read] == [
        {n: v.encode() for n, v in r.properties.items()} for _o, r, _t in want
    ]


@FAST
@given(
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=5),
    skip=st.integers(0, 12),
    limit=st.integers(0, 1500),
    first=st.booleans(),
)
def test_a_partition_s_batches_fit_the_limit_the_first_always_whole(
    compiled: ModuleType, sizes: list[int], skip: int, limit: int, first: bool
) -> None:
    payloads, offset = [], 1000
    for n in sizes:
        recs = [pb.Record(key=b"k%d" % i, value=b"v" * 90) for i in range(n)]
        payloads.append(stored_payload(recs, offset, 7, [True] * n))
        offset += n
    start = 1000 + skip
    got = compiled.fetched_batches(payloads, start, limit, first)
    assert got == _records_py.fetched_batches(payloads, start, limit, first)
    data, used, last = got
    alone = [_records_py.fetched_batches([p], start, ANY_SIZE, False)[0] for p in payloads]
    assert data == b"".join(alone[:used])
    assert len(data) <= limit or (first and data == next(a for a in alone if a))
    if used < len(payloads):  # stopped at a batch that did not fit
        assert alone[used] and len(data) + len(alone[used]) > limit
        assert data or not first
    batches = [DefaultRecordBatch(data[i:j]) for i, j in _bounds(data)]
    assert all(b.validate_crc() for b in batches)
    offsets = [r.offset for b in batches for r in b]
    assert offsets == list(range(max(start, 1000), max(start, 1000) + len(offsets)))
    assert last == (offsets[-1] if offsets else -1)


def _bounds(data: bytes) -> Iterator[tuple[int, int]]:
    at = 0
    while at < len(data):
        end = at + struct.unpack_from(">i", data, at + 8)[0] + 12
        yield at, end
        at = end


def test_a_property_stored_twice_is_one_header_with_its_last_value(compiled: ModuleType) -> None:
    def entry(name: bytes, value: bytes) -> bytes:
        body = b"\x0a" + bytes([len(name)]) + name + b"\x12" + bytes([len(value)]) + value
        return b"\x22" + bytes([len(body)]) + body

    body = b"\x0a\x02\x10\x07" + entry(b"a", b"1") + entry(b"b", b"2") + entry(b"a", b"3")
    payload = b"\x0a" + bytes([len(body) + 2]) + body + b"\x28\x05"
    got = compiled.fetched_batches([payload], 0, ANY_SIZE, True)
    assert got == _records_py.fetched_batches([payload], 0, ANY_SIZE, True)
    [record] = list(DefaultRecordBatch(got[0]))
    assert record.headers == [("a", b"3"), ("b", b"2")] and record.timestamp == 5


@pytest.mark.parametrize("payload", [b"\x0a\x05\x0a", b"\x0a\x03\x0a\x01\x08", b"\x0a\x02\x0a\x09"])
def test_a_payload_that_does_not_parse_is_corrupt_data(
    compiled: ModuleType, payload: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = batch.check(batch.pack(payload, 1, MessageId(0, 0), MessageId(0, 0), 1, 1), "t")
    stored = (batch.pack(payload, 1, MessageId(0, 0), MessageId(0, 0), 1, 1), head, 0)
    good = stored_payload([pb.Record(key=b"k", value=b"v")], 0, 7, [True])
    packed = batch.pack(good, 1, MessageId(0, 0), MessageId(0, 0), 1, 1)
    fine = (packed, batch.check(packed, "t"), 0)
    for twin in (compiled, _records_py):
        monkeypatch.setattr(records, "twin", twin)
        for run in ([stored], [fine, stored]):  # also after a batch already converted
            with pytest.raises(CorruptData, match="topic 't': a stored batch does not parse"):
                records.fetched_records(run, 0, ANY_SIZE, True, "topic 't'")  # type: ignore[arg-type]


# ---- produce -------------------------------------------------------------------------


def kafka_batch(recs: list[pb.Record], codec: int = 0, base_ts: int | None = None) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 2**31 - 1)
    for i, r in enumerate(recs):
        headers = [(n, v.encode()) for n, v in r.properties.items()]
        stamp = r.event_time_ms if base_ts is None else base_ts + i
        key = r.key if r.HasField("key") else None
        value = r.value if r.HasField("value") else None
        builder.append(i, stamp, key, value, headers)
    return bytes(builder.build())


def both(compiled: ModuleType, data: bytes) -> pb.PublishRequest:
    """The request both twins make of ``data``, checked the same."""
    c = pb.PublishRequest.FromString(compiled.produced_request(data, records.decompress))
    assert c == pb.PublishRequest.FromString(_records_py.produced_request(data, records.decompress))
    return c


@FAST
@given(recs=RECORDS, split=st.integers(1, 12), codec=st.sampled_from([0, 0, 1, 2, 3, 4]))
def test_both_twins_produce_the_same_request(
    compiled: ModuleType, recs: list[pb.Record], split: int, codec: int
) -> None:
    data = kafka_batch(recs[:split], codec) + kafka_batch(recs[split:], codec)[: 10**6]
    if not recs[split:]:
        data = kafka_batch(recs, codec)
    assert list(both(compiled, data).records) == recs


def test_a_partial_batch_at_the_end_is_left_unread(compiled: ModuleType) -> None:
    recs = [pb.Record(key=b"k", value=b"v", event_time_ms=7)]
    assert list(both(compiled, kafka_batch(recs) + kafka_batch(recs)[:30]).records) == recs


def test_log_append_time_gives_every_record_the_max_timestamp(compiled: ModuleType) -> None:
    data = bytearray(kafka_batch([pb.Record(value=b"a"), pb.Record(value=b"b")], base_ts=100))
    data[22] |= 0x08  # attributes: LogAppendTime
    _refresh_crc(data)
    assert [r.event_time_ms for r in both(compiled, bytes(data)).records] == [101, 101]


def _refresh_crc(data: bytearray) -> None:
    import crc32c

    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))


def _refused(twin: Any, data: bytes) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        twin.produced_request(data, records.decompress)
    return info.value.code


def _bad_batches() -> dict[str, tuple[bytes, ErrorCode]]:
    good = kafka_batch([pb.Record(key=b"k", value=b"value", properties={"h": "x"})])
    crc = bytearray(good)
    crc[-1] ^= 1
    magic = bytearray(good)
    magic[16] = 1
    transactional = bytearray(good)
    transactional[22] |= 0x10
    _refresh_crc(transactional)
    short = bytearray(good)  # the record's length says one byte more than it has
    short[61] += 2
    _refresh_crc(short)
    bad_text = bytearray(good)
    bad_text[-1] = 0xFF  # the header value's last byte
    _refresh_crc(bad_text)
    return {
        "crc": (bytes(crc), ErrorCode.corrupt_message),
        "magic": (bytes(magic), ErrorCode.unsupported_version),
        "transactional": (bytes(transactional), ErrorCode.invalid_record),
        "record length": (bytes(short), ErrorCode.corrupt_message),
        "header not UTF-8": (bytes(bad_text), ErrorCode.invalid_record),
        "no records": (good[:40], ErrorCode.invalid_record),
    }


@pytest.mark.parametrize("case", list(_bad_batches()))
def test_both_twins_refuse_a_bad_batch_alike(compiled: ModuleType, case: str) -> None:
    data, code = _bad_batches()[case]
    assert _refused(compiled, data) == _refused(_records_py, data) == code


def test_a_batch_that_does_not_decompress_is_corrupt(compiled: ModuleType) -> None:
    data = bytearray(kafka_batch([pb.Record(value=b"v" * 50)]))
    data[22] |= 0x04  # zstd, over bytes that are not
    _refresh_crc(data)
    assert _refused(compiled, bytes(data)) == ErrorCode.corrupt_message
    data[22] |= 0x07  # no such codec
    _refresh_crc(data)
    assert _refused(compiled, bytes(data)) == ErrorCode.unsupported_compression_type


@FAST
@given(
    recs=RECORDS,
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 10**6),
)
def test_a_damaged_batch_is_refused_never_more(
    compiled: ModuleType, recs: list[pb.Record], flips: list[tuple[int, int]], cut: int | None
) -> None:
    """Bytes off the network, damaged past the CRC (it is made to match): the compiled
    twin gives a request or a ``KafkaError``, nothing else (and never reads out of bounds)."""
    data = bytearray(kafka_batch(recs))
    for at, byte in flips:
        data[12 + at % (len(data) - 12)] = byte
    if cut is not None:
        data = data[: cut % len(data)]
    if len(data) > 61:
        _refresh_crc(data)
    try:
        request = pb.PublishRequest.FromString(
            compiled.produced_request(bytes(data), records.decompress)
        )
    except KafkaError:
        return
    assert len(request.records) >= 1  # an accepted produce holds records
