"""The batch codec: ``storage/batch.py`` and its two twins, ``_batch.c`` and ``_batch_py.py``.

Every codec case runs once per twin (the ``twin`` fixture, which also points
``batch.codec`` at it) and is checked three ways: against the pure-Python twin (byte for
byte), against protobuf's own parse/serialization of the same messages, and against the
layouts drawn in ``storage/batch.py``.
"""

from __future__ import annotations

import importlib
import os
import random
import struct
from collections.abc import Callable, Iterator
from dataclasses import replace
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.errors import CorruptData
from compactlog.storage import _batch_py, batch
from compactlog.storage.types import MessageId, Record, StoredMessage
from compactlog.v1 import compactlog_pb2 as pb

PY = _batch_py
BIG = 2**62  # "no room limit"
I64 = st.integers(-(2**63), 2**63 - 1)
U64 = st.integers(0, 2**64 - 1)
LEDGERS = st.just(0) | U64  # 0: SEGMENTED topics
FIRSTS = st.just(0) | st.integers(0, 2**40) | st.integers(2**32, 2**64 - 64)
PUBLISH = st.just(0) | I64
FAST = settings(max_examples=60, deadline=None)

# ---- wire helpers ---------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _len_field(field: int, body: bytes) -> bytes:
    return _tag(field, 2) + _varint(len(body)) + body


def _scalar_field(field: int, wire: int, n: int) -> bytes:
    value = {0: _varint(n), 1: n.to_bytes(8, "little"), 5: (n & 0xFFFFFFFF).to_bytes(4, "little")}
    return _tag(field, wire) + value[wire]


def _key_value(rec: Record) -> dict[str, bytes]:
    return {name: v for name, v in (("key", rec.key), ("value", rec.value)) if v is not None}


def _to_pb(rec: Record) -> pb.Record:
    return pb.Record(properties=rec.properties, event_time_ms=rec.event_time_ms, **_key_value(rec))


def _request(recs: list[Record], topic: str = "") -> bytes:
    return pb.PublishRequest(topic=topic, records=[_to_pb(r) for r in recs]).SerializeToString()


def _expected(recs: list[Record], ledger: int, first: int, publish: int) -> list[pb.Message]:
    return [
        pb.Message(
            id=pb.MessageId(ledger_id=ledger, entry_id=first + i),
            properties=rec.properties,
            publish_time_ms=publish,
            event_time_ms=rec.event_time_ms or publish,
            **_key_value(rec),
        )
        for i, rec in enumerate(recs)
    ]


def key_flags(key: bytes | None, value: bytes | None) -> int:
    present = batch.VALUE_PRESENT | (batch.VALUE_NON_EMPTY if value else 0)
    return (batch.HAS_KEY if key is not None else 0) | (present if value is not None else 0)


def index_hashes(block: bytes) -> list[int]:
    """The index block's hash of each record (big-endian u32; 0: keyless)."""
    return [struct.unpack_from(">I", block, pos)[0] for pos in range(0, len(block), 4)]


def run_entries(run: bytes) -> list[tuple[int, int]]:
    """(hash u32, entry u64) per run entry."""
    return [struct.unpack_from(">IQ", run, pos) for pos in range(0, len(run), 12)]


def _size_without_id(msg: pb.Message) -> int:
    copy = pb.Message()
    copy.CopyFrom(msg)
    copy.ClearField("id")
    return copy.ByteSize()


def _stored(msg: pb.Message) -> StoredMessage:
    return StoredMessage(
        MessageId(msg.id.ledger_id, msg.id.entry_id),
        msg.key if msg.HasField("key") else None,
        msg.value if msg.HasField("value") else None,
        dict(msg.properties),
        msg.publish_time_ms,
        msg.event_time_ms,
    )


def _outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """A twin's result, or that it refused the bytes; any other exception fails the test."""
    try:
        return "ok", fn(*args)
    except PY.MalformedPayload:
        return "malformed", None


# ---- strategies -----------------------------------------------------------------------

RECORDS = st.builds(
    Record,
    key=st.none() | st.binary(max_size=24),
    value=st.none() | st.binary(max_size=48),
    properties=st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3),
    event_time_ms=st.just(0) | I64,
)
# Fields a PublishRequest may carry besides its records (2): the topic, unknown fields.
UNKNOWN = st.integers(3, 2**29 - 1)
JUNK = (
    st.text(max_size=8).map(lambda t: pb.PublishRequest(topic=t).SerializeToString())
    | st.builds(_scalar_field, UNKNOWN, st.sampled_from([0, 1, 5]), U64)
    | st.builds(_len_field, UNKNOWN, st.binary(max_size=8))
)


@st.composite
def interleaved(draw: st.DrawFn, max_records: int = 8) -> tuple[list[Record], bytes]:
    """Records with non-record fields before, between and after them."""
    recs = draw(st.lists(RECORDS, max_size=max_records))
    parts = [b"".join(draw(st.lists(JUNK, max_size=2)))]
    for rec in recs:
        parts += [_request([rec]), b"".join(draw(st.lists(JUNK, max_size=2)))]
    return recs, b"".join(parts)


# Arbitrary protobuf-shaped bytes; field numbers include ones whose low 32 bits name a
# field the codec knows (2**32 + n), which must not be taken for it.
FIELDS = st.integers(1, 6) | st.integers(1, 2**61 - 1) | st.integers(1, 6).map(lambda f: 2**32 + f)
WIRE_FIELDS = st.recursive(
    st.builds(_scalar_field, FIELDS, st.sampled_from([0, 1, 5]), U64)
    | st.builds(_len_field, FIELDS, st.binary(max_size=6)),
    lambda inner: st.builds(_len_field, FIELDS, st.lists(inner, max_size=4).map(b"".join)),
    max_leaves=12,
)
WIRE_BYTES = st.binary(max_size=64) | st.lists(WIRE_FIELDS, max_size=5).map(b"".join)


@st.composite
def stored_batches(draw: st.DrawFn) -> tuple[bytes, list[MessageId]]:
    """A packed batch with contiguous ids or, COMPACTED, ascending ids with gaps."""
    n = draw(st.integers(1, 8))
    compacted = draw(st.booleans())
    if compacted:
        pairs = draw(
            st.sets(st.tuples(st.integers(0, 3), st.integers(0, 20)), min_size=n, max_size=n)
        )
        ids = [MessageId(*p) for p in sorted(pairs)]
    else:
        ledger, first = draw(st.integers(0, 3)), draw(st.integers(0, 20))
        ids = [MessageId(ledger, first + i) for i in range(n)]
    recs = draw(st.lists(RECORDS, min_size=n, max_size=n))
    payload = b"".join(
        PY.encode_records(_request([r]), 0, *i, 5, 1, BIG)[0]
        for r, i in zip(recs, ids, strict=True)
    )
    attributes = batch.COMPACTED if compacted else 0
    return batch.pack(payload, n, ids[0], ids[-1], 5, 5, attributes), ids


# ---- the twins ------------------------------------------------------------------------


def _compiled_twin() -> ModuleType:
    if batch.COMPILED:
        return importlib.import_module("compactlog.storage._batch")
    if os.environ.get("COMPACTLOG_NO_EXT") == "1":
        pytest.skip("COMPACTLOG_NO_EXT=1: installed without the compiled twin")
    pytest.fail("compactlog.storage._batch is not built: run `pip install -e .` with a C compiler")


@pytest.fixture(scope="module", params=["python", "compiled"])
def twin(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    module = PY if request.param == "python" else _compiled_twin()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batch, "codec", module)
        yield module


def encode(
    twin: ModuleType,
    raw: bytes,
    ledger: int,
    first: int,
    publish: int,
    pos: int = 0,
    max_count: int = 2**31,
    room: int = BIG,
) -> batch.EncodedRun:
    out = twin.encode_records(raw, pos, ledger, first, publish, max_count, room)
    assert out == PY.encode_records(raw, pos, ledger, first, publish, max_count, room)
    return batch.EncodedRun(*out)


def check_walk(twin: ModuleType, payload: bytes, want: list[pb.Message]) -> None:
    """walk/skip_records/decode_message of ``payload`` against the messages it holds."""
    walked = twin.walk(payload)
    assert walked == PY.walk(payload) == twin.walk(memoryview(payload))
    assert all(isinstance(w[3], bytes | None) for w in twin.walk(memoryview(payload)))
    stored = [_stored(m) for m in want]
    assert [w[:4] for w in walked] == [(*m.id, key_flags(m.key, m.value), m.key) for m in stored]
    bounds = [w[4] for w in walked] + [len(payload)]
    assert bounds[0] == 0 and [w[5] for w in walked] == bounds[1:]  # the records tile it
    assert twin.walk(payload, bounds[min(1, len(want))]) == walked[1:]
    for i, ((*_, start, end), msg) in enumerate(zip(walked, want, strict=True)):
        record = payload[start:end]
        assert list(pb.ReadResponse.FromString(record).messages) == [msg]
        assert batch.decode_message(record) == stored[i]
        assert twin.skip_records(payload, 0, i) == start
        assert twin.skip_records(payload, start, 1) == end
    assert twin.skip_records(payload, 0, len(want)) == len(payload)
    assert twin.skip_records(payload, 0, len(want) + 3) == len(payload)


# ---- encode_records -------------------------------------------------------------------


@FAST
@given(st.lists(RECORDS, max_size=8), st.text(max_size=8), LEDGERS, FIRSTS, PUBLISH)
def test_encode_records_matches_protobuf(
    twin: ModuleType, recs: list[Record], topic: str, ledger: int, first: int, publish: int
) -> None:
    raw = _request(recs, topic)
    run = encode(twin, raw, ledger, first, publish)
    want = _expected(recs, ledger, first, publish)
    assert (run.count, run.next_pos) == (len(recs), len(raw))
    assert list(pb.ReadResponse.FromString(run.payload).messages) == want
    if all(len(r.properties or {}) <= 1 for r in recs):  # else protobuf's map order is its own
        assert run.payload == pb.ReadResponse(messages=want).SerializeToString()
    hashes = [PY.key_hash(r.key) if r.key is not None else 0 for r in recs]
    assert index_hashes(run.index_block) == (hashes if any(hashes) else [])
    assert run_entries(twin.block_entries(run.index_block, first)) == [
        (h, first + i) for i, h in enumerate(hashes) if h
    ]
    sizes = [_size_without_id(m) for m in want]
    assert run.max_size == max(sizes, default=-1)
    assert run.max_size_index == (sizes.index(run.max_size) if sizes else -1)
    assert run.max_event_time_ms == max((m.event_time_ms for m in want), default=-(2**63))
    check_walk(twin, run.payload, want)


@FAST
@given(interleaved(), FIRSTS, st.integers(1, 4), st.integers(1, 300))
def test_split_calls_concatenate_to_one(
    twin: ModuleType, request: tuple[list[Record], bytes], first: int, max_count: int, room: int
) -> None:
    recs, raw = request
    whole = encode(twin, raw, 7, first, 5)
    clean = encode(twin, _request(recs), 7, first, 5)
    assert whole.next_pos == len(raw)
    assert replace(whole, next_pos=0) == replace(clean, next_pos=0)
    parts: list[batch.EncodedRun] = []
    pos, done = 0, 0
    while True:
        run = encode(twin, raw, 7, first + done, 5, pos, max_count, room)
        parts.append(run)
        done += run.count
        assert (run.next_pos == len(raw)) == (done == len(recs))
        if run.count:  # the last record began below room
            assert twin.walk(run.payload)[-1][4] < room
        if run.next_pos == len(raw):
            break
        assert raw[run.next_pos] == 0x12  # stopped at a record, junk before it skipped
        assert run.count == max_count or len(run.payload) >= room
        pos = run.next_pos
    assert b"".join(p.payload for p in parts) == whole.payload
    starts = [first + sum(q.count for q in parts[:i]) for i in range(len(parts))]
    assert b"".join(
        twin.block_entries(p.index_block, at) for p, at in zip(parts, starts, strict=True)
    ) == twin.block_entries(whole.index_block, first)
    assert sum(p.count for p in parts) == whole.count == len(recs)
    assert max(p.max_event_time_ms for p in parts) == whole.max_event_time_ms
    assert max(p.max_size for p in parts) == whole.max_size


def test_room_and_max_count_stop_at_record_boundaries(twin: ModuleType) -> None:
    junk = _scalar_field(9, 0, 300) + pb.PublishRequest(topic="t").SerializeToString()
    raw = junk + _request([Record(b"k", b"v" * n) for n in (3, 4, 5)]) + junk
    ends = [w[5] for w in twin.walk(encode(twin, raw, 1, 0, 5).payload)]
    run = encode(twin, raw, 1, 0, 5, max_count=0)
    assert (run.count, run.next_pos, run.payload) == (0, len(junk), b"")
    assert encode(twin, raw, 1, 0, 5, room=ends[0]).count == 1  # reaches room exactly
    assert encode(twin, raw, 1, 0, 5, room=ends[0] + 1).count == 2
    assert encode(twin, raw, 1, 0, 5, room=ends[2]).next_pos == len(raw)
    run = encode(twin, junk, 1, 0, 5)
    assert (run.count, run.next_pos, run.max_size, run.max_size_index) == (0, len(junk), -1, -1)


@FAST
@given(st.lists(RECORDS, max_size=6), PUBLISH)
def test_records_to_request_matches_protobuf(
    twin: ModuleType, recs: list[Record], publish: int
) -> None:
    raw = batch.records_to_request(recs)
    want = pb.PublishRequest(records=[_to_pb(r) for r in recs])
    assert pb.PublishRequest.FromString(raw) == want
    ours = encode(twin, raw, 3, 10, publish)
    theirs = encode(twin, want.SerializeToString(), 3, 10, publish)
    assert replace(ours, payload=b"") == replace(theirs, payload=b"")
    assert pb.ReadResponse.FromString(ours.payload) == pb.ReadResponse.FromString(theirs.payload)
    if all(len(r.properties or {}) <= 1 for r in recs):
        assert ours.payload == theirs.payload


# ---- pack / check / select ------------------------------------------------------------

IDS = st.tuples(U64, U64).map(lambda t: MessageId(*t))


HEADER_FIELDS = st.tuples(st.integers(1, 2**32 - 1), IDS, IDS, I64, I64, st.integers(0, 255), I64)


@FAST
@given(st.binary(max_size=40), HEADER_FIELDS)
def test_pack_check_round_trip(payload: bytes, fields: tuple[Any, ...]) -> None:
    count, first, last, publish, max_event, attributes, horizon = fields
    first, last = min(first, last), max(first, last)
    data = batch.pack(payload, count, first, last, publish, max_event, attributes, horizon)
    header = batch.check(data, "t")
    assert header == batch.BatchHeader(
        len(data), attributes, count, first, last, publish, max_event, horizon
    )
    assert header.compacted == bool(attributes & batch.COMPACTED)
    assert bytes(batch.payload_of(data, header)) == payload
    assert batch.peek_length(data) == len(data) == batch.HEADER_SIZE + len(payload)
    framed = b"head" + data + data
    assert batch.check(framed, "t", 4) == batch.check(framed, "t", 4 + len(data)) == header


def _small_batch() -> bytes:
    recs = [Record(b"k", b"v", {"p": "q"}, 3), Record(None, b""), Record(b"", None)]
    run = batch.encode_request(_request(recs), 0, 2, 40, 9)
    return batch.pack(run.payload, 3, MessageId(2, 40), MessageId(2, 42), 9, 9)


def test_every_changed_byte_of_a_batch_is_caught() -> None:
    data = _small_batch()
    batch.check(data, "t")
    for pos in range(len(data)):
        for mask in range(1, 256):
            corrupted = bytearray(data)
            corrupted[pos] ^= mask
            with pytest.raises(CorruptData):
                batch.check(bytes(corrupted), "t")


@FAST
@given(stored_batches(), st.data())
def test_a_changed_or_truncated_batch_is_caught(
    stored: tuple[bytes, list[MessageId]], data: st.DataObject
) -> None:
    packed, _ids = stored
    pos = data.draw(st.integers(0, len(packed) - 1))
    corrupted = bytearray(packed)
    corrupted[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptData):
        batch.check(bytes(corrupted), "t")
    with pytest.raises(CorruptData):
        batch.check(packed[:pos], "t")


POINTS = st.tuples(st.integers(0, 4), st.integers(0, 30)).map(lambda t: MessageId(*t))


@FAST
@given(stored_batches(), st.data(), st.integers(0, 10))
def test_select_equals_filtering_the_walk(
    twin: ModuleType, stored: tuple[bytes, list[MessageId]], draw: st.DataObject, limit: int
) -> None:
    data, ids = stored
    start, stop = (draw.draw(st.sampled_from(ids) | POINTS) for _ in range(2))
    header = batch.check(data, "t")
    payload = bytes(batch.payload_of(data, header))
    walked = batch.walk(payload, "t")
    assert [w[:2] for w in walked] == ids
    picked = [w for w in walked if start <= (w[0], w[1]) <= stop][:limit]
    view, count, last = batch.select(data, header, start, stop, limit, "t")
    assert count == len(picked)
    assert last == (MessageId(*picked[-1][:2]) if picked else None)
    assert bytes(view) == b"".join(payload[w[4] : w[5]] for w in picked)
    if start <= ids[0] and ids[-1] <= stop and len(ids) <= limit:
        assert view.obj is data and bytes(view) == payload  # the stored bytes, untouched


@FAST
@given(stored_batches(), st.data(), st.integers(0, 10))
def test_span_is_the_same_in_both_twins(
    twin: ModuleType, stored: tuple[bytes, list[MessageId]], draw: st.DataObject, limit: int
) -> None:
    data, ids = stored
    start, stop = (draw.draw(st.sampled_from(ids) | POINTS) for _ in range(2))
    payload = bytes(batch.payload_of(data, batch.check(data, "t")))
    args = (payload, start[0], start[1], stop[0], stop[1], limit)
    got = twin.span(*args)
    assert got == PY.span(*args)
    picked = [w for w in PY.walk(payload) if start <= (w[0], w[1]) <= stop][:limit]
    if picked:
        assert got == (picked[0][4], picked[-1][5], len(picked), *picked[-1][:2])
    else:
        assert got[2] == 0


# ---- malformed bytes, id runs ---------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(WIRE_BYTES, st.integers(0, 3), st.integers(1, 40))
def test_malformed_bytes_are_refused_alike(
    twin: ModuleType, blob: bytes, max_count: int, room: int
) -> None:
    for name, args in [
        ("walk", (blob,)),
        ("skip_records", (blob, 0, max_count)),
        ("span", (blob, 0, 0, 2**64 - 1, 2**64 - 1, max_count)),
        ("encode_records", (blob, 0, 1, 2**40, -5, max_count, room)),
        ("encode_records", (blob, 0, 0, 0, 0, 2**31, BIG)),
    ]:
        got = _outcome(getattr(twin, name), *args)
        assert got == _outcome(getattr(PY, name), *args), name
    walked = _outcome(twin.walk, memoryview(blob))
    assert walked == _outcome(twin.walk, blob)
    assert all(isinstance(w[3], bytes | None) for w in walked[1] or ())
    if walked[0] == "malformed":
        with pytest.raises(CorruptData):
            batch.walk(blob, "t")


def test_positions_outside_the_bytes_are_refused_alike(twin: ModuleType) -> None:
    payload = encode(twin, _request([Record(b"k", b"v")]), 1, 2, 3).payload
    n = len(payload)
    for fn, args in [
        (twin.encode_records, (payload, n + 1, 0, 0, 0, 1, BIG)),
        (twin.encode_records, (payload, -1, 0, 0, 0, 1, BIG)),
        (twin.walk, (payload, 0, n + 1)),
        (twin.walk, (payload, -1)),
        (twin.walk, (payload, 2, 1)),
        (twin.skip_records, (payload, n + 1, 1)),
        (twin.skip_records, (payload, -1, 1)),
    ]:
        with pytest.raises(PY.MalformedPayload):
            fn(*args)


@pytest.mark.parametrize("field", [1, 2, 3, 4])
def test_field_numbers_beyond_32_bits_are_not_known_fields(twin: ModuleType, field: int) -> None:
    alias = 2**32 + field  # its low 32 bits name a field the codec reads
    unknown = _scalar_field(alias, 0, 77) if field == 4 else _len_field(alias, b"\x08\x01")
    run = encode(twin, _len_field(2, unknown), 1, 2, 5)  # skipped, like any unknown field
    plain = encode(twin, _request([Record(None, None)]), 1, 2, 5)
    assert replace(run, next_pos=0) == replace(plain, next_pos=0)
    record = _len_field(1, _len_field(1, b"\x08\x03") + unknown)
    assert twin.walk(record) == PY.walk(record) == [(3, 0, 0, None, 0, len(record))]


@FAST
@given(st.lists(st.tuples(U64, st.integers(0, 2**64 - 8), st.integers(0, 5)), max_size=4))
def test_id_runs_match_protobuf(twin: ModuleType, runs: list[tuple[int, int, int]]) -> None:
    want = pb.PublishResponse(
        ids=[pb.MessageId(ledger_id=led, entry_id=f + k) for led, f, n in runs for k in range(n)]
    )
    got = twin.id_runs(runs)
    assert got == PY.id_runs(runs) == batch.id_runs(runs) == want.SerializeToString()
    assert pb.PublishResponse.FromString(got) == want


# ---- key index helpers ------------------------------------------------------------------


@FAST
@given(st.binary(max_size=40))
def test_key_hash_is_folded_fnv1a_in_both_twins(twin: ModuleType, key: bytes) -> None:
    assert twin.key_hash(key) == PY.key_hash(key) == twin.key_hash(memoryview(key))
    assert 0 < twin.key_hash(key) < 2**32


def test_key_hash_known_values(twin: ModuleType) -> None:
    def folded(h: int) -> int:  # FNV-1a 64 test vectors, folded to 32 bits
        return (h ^ (h >> 32)) & 0xFFFFFFFF

    assert twin.key_hash(b"") == folded(0xCBF29CE484222325)
    assert twin.key_hash(b"a") == folded(0xAF63DC4C8601EC8C)
    assert twin.key_hash(b"foobar") == folded(0x85944171F73967E8)


RUN = st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1)), max_size=40)


@FAST
@given(RUN)
def test_sort_index_sorts_entries(twin: ModuleType, entries: list[tuple[int, int]]) -> None:
    run = b"".join(struct.pack(">IQ", h, e) for h, e in entries)
    assert twin.sort_index(run) == PY.sort_index(run)
    assert run_entries(twin.sort_index(run)) == sorted(entries)


@pytest.mark.parametrize("distinct_hashes", [3, 1000, 2**32])
def test_sort_index_sorts_large_runs(twin: ModuleType, distinct_hashes: int) -> None:
    rng = random.Random(distinct_hashes)
    entries = [(rng.randrange(distinct_hashes), rng.randrange(2**64)) for _ in range(5000)]
    run = b"".join(struct.pack(">IQ", h, e) for h, e in entries)
    assert run_entries(twin.sort_index(run)) == sorted(entries)
    assert twin.sort_index(twin.sort_index(run)) == twin.sort_index(run)


@FAST
@given(st.lists(st.integers(0, 2**32 - 1), max_size=20), st.integers(0, 2**63))
def test_block_entries_skip_keyless_records(
    twin: ModuleType, hashes: list[int], first: int
) -> None:
    block = b"".join(struct.pack(">I", h) for h in hashes)
    assert twin.block_entries(block, first) == PY.block_entries(block, first)
    assert run_entries(twin.block_entries(block, first)) == [
        (h, first + i) for i, h in enumerate(hashes) if h
    ]


def test_torn_index_data_is_refused(twin: ModuleType) -> None:
    with pytest.raises(PY.MalformedPayload):
        twin.sort_index(b"x" * 13)
    with pytest.raises(PY.MalformedPayload):
        twin.block_entries(b"x" * 5, 0)


@pytest.mark.parametrize("partition", [1, 7, 2**31 - 1])
def test_partition_goes_into_every_id(twin: ModuleType, partition: int) -> None:
    """The messages of ``NAME-partition-i`` carry ``MessageId.partition``; walkers still
    read ledger and entry from such ids (the unknown-to-them field is skipped)."""
    records = [pb.Record(key=b"k%d" % i, value=b"v") for i in range(3)]
    raw = pb.PublishRequest(topic="t", records=records).SerializeToString()
    out = twin.encode_records(raw, 0, 5, 2**40, 1000, 100, 2**40, partition)
    assert out == PY.encode_records(raw, 0, 5, 2**40, 1000, 100, 2**40, partition)
    messages = pb.ReadResponse.FromString(out[0]).messages
    assert [(m.id.ledger_id, m.id.entry_id, m.id.partition) for m in messages] == [
        (5, 2**40 + i, partition) for i in range(3)
    ]
    assert [w[:2] for w in twin.walk(out[0])] == [(5, 2**40 + i) for i in range(3)]
    assert twin.span(out[0], 5, 2**40 + 1, 5, 2**40 + 2, 10)[2] == 2
    plain = twin.encode_records(raw, 0, 5, 2**40, 1000, 100, 2**40)
    assert out[5] == plain[5]  # sizes (max.message.bytes) leave the id out
    with pytest.raises(ValueError):
        twin.encode_records(raw, 0, 5, 0, 1000, 100, 2**40, -1)


def test_route_records_splits_as_kafka_routes(twin: ModuleType) -> None:
    """Both twins split a request's raw records identically: keyed by murmur2 (the last
    key field wins), keyless round-robin from the given turn; other fields skipped."""
    from compactlog.partitioner import partition_for_key

    records = [pb.Record(key=b"key-%d" % i, value=b"v%d" % i) for i in range(40)]
    records += [pb.Record(value=b"keyless-%d" % i) for i in range(5)]
    records.append(pb.Record(key=b"", value=b"empty key"))
    raw = pb.PublishRequest(topic="t", records=records).SerializeToString()
    out = twin.route_records(raw, 4, 7)
    assert out == PY.route_records(raw, 4, 7)
    parts, order, keyless = out
    assert keyless == 5
    pairs = memoryview(order).cast("I").tolist()
    placed = list(zip(pairs[0::2], pairs[1::2], strict=True))
    for record, (partition, index) in zip(records, placed, strict=True):
        part = pb.PublishRequest.FromString(parts[partition]).records
        assert part[index] == record
        if record.HasField("key"):
            assert partition == partition_for_key(record.key, 4)
    assert [p for p, _i in placed[40:45]] == [(7 + i) % 4 for i in range(5)]
    last_key_wins = b"\x12\x06\x0a\x01a\x0a\x01b"  # one record with two key fields
    assert twin.route_records(last_key_wins, 4, 0)[0][partition_for_key(b"b", 4)]
    with pytest.raises(PY.MalformedPayload):
        twin.route_records(b"\x12\x05ab", 4, 0)
    with pytest.raises(ValueError):
        twin.route_records(raw, 0, 0)
