"""In-process appends (domain records) and the server's path (raw PublishRequest bytes)
store the same batches: both go through one encoder."""

from __future__ import annotations

from compactlog.storage import batch
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


def test_wire_and_domain_requests_store_the_same_messages() -> None:
    wire = pb.PublishRequest(topic="t", records=[to_pb(r) for r in CASES]).SerializeToString()
    domain = batch.records_to_request(CASES)
    w = batch.encode_request(wire, 0, 3, 7, 1000)
    d = batch.encode_request(domain, 0, 3, 7, 1000)
    assert w.count == d.count == len(CASES)
    assert pb.ReadResponse.FromString(w.payload) == pb.ReadResponse.FromString(d.payload)
    assert w.index_block == d.index_block  # the key hashes of the key index
    got = pb.ReadResponse.FromString(w.payload).messages
    assert [(m.id.ledger_id, m.id.entry_id) for m in got] == [(3, 7 + i) for i in range(6)]
    assert [m.HasField("value") for m in got] == [r.value is not None for r in CASES]
    assert got[5].event_time_ms == 42 and got[0].event_time_ms == 1000
