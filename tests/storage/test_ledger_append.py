"""The server's protobuf fast path encodes exactly what the domain path does."""

from __future__ import annotations

from compactlog.storage.ledger_append import encode_records, encode_wire_records
from compactlog.storage.types import Record
from compactlog.v1 import compactlog_pb2 as pb

CASES = [
    Record(b"k", b"v"),
    Record(b"k", b""),  # empty value: a LEDGER tombstone, but a present value
    Record(b"k", None),
    Record(None, b"keyless"),
    Record(None, None),
    Record(b"k", b"v", {"a": "1", "b": "2"}, 42),
]


def to_pb(rec: Record) -> pb.Record:
    out = pb.Record(event_time_ms=rec.event_time_ms)
    if rec.key is not None:
        out.key = rec.key
    if rec.value is not None:
        out.value = rec.value
    if rec.properties:
        out.properties.update(rec.properties)
    return out


def test_wire_and_domain_encodings_agree_entry_for_entry() -> None:
    wire = encode_wire_records([to_pb(r) for r in CASES], 1000, 1 << 20)
    domain = encode_records(CASES, 1000, 1 << 20)
    assert len(wire) == len(CASES)
    for (w_data, w_part), (d_data, d_part) in zip(wire, domain, strict=True):
        assert pb.Message.FromString(w_data) == pb.Message.FromString(d_data)
        assert w_part == d_part  # key-block flags, size and key
