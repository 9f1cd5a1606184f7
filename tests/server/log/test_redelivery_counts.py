"""``server.log.redelivery_counts``: the counts a dispatcher keeps, and the rewrite of a
Consume response's spliced records that carries them (``Message.redelivery_count``),
checked by parsing the result with the generated classes, under both codec twins."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType

import pytest

from compactlog.server.log.redelivery_counts import RedeliveryCounts, with_counts
from compactlog.storage import _batch_py, batch
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb


@pytest.fixture(params=["python", "compiled"])
def twin(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    if request.param == "python":
        module: ModuleType = _batch_py
    elif batch.COMPILED:
        module = importlib.import_module("compactlog.storage._batch")
    else:
        pytest.skip("the compiled twin is not built here")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batch, "codec", module)
        yield module


def response(sizes: list[int]) -> bytes:
    """Stored-record bytes of messages 1:0, 1:1, ... with values of ``sizes`` bytes (a
    ConsumeResponse's encoding is the records spliced)."""
    messages = [
        pb.Message(
            id=pb.MessageId(ledger_id=1, entry_id=i),
            key=b"k%d" % i,
            value=b"v" * size,
            properties={"p": str(i)},
            publish_time_ms=1000 + i,
            event_time_ms=2000 + i,
        )
        for i, size in enumerate(sizes)
    ]
    return pb.ConsumeResponse(messages=messages).SerializeToString()


def test_counted_records_carry_the_count_and_the_rest_are_untouched(twin: ModuleType) -> None:
    # 100 bytes of value puts a record's body at 126: the count makes its length varint
    # grow to two bytes; 300 has a two-byte length already.
    raw = response([3, 100, 300, 5])
    counts = {MessageId(1, 1): 1, MessageId(1, 2): 300}
    out = pb.ConsumeResponse.FromString(with_counts(raw, counts, "t"))
    before = pb.ConsumeResponse.FromString(raw)
    assert [m.redelivery_count for m in out.messages] == [0, 1, 300, 0]
    for got, was in zip(out.messages, before.messages, strict=True):
        got.ClearField("redelivery_count")
        assert got == was


def test_nothing_counted_returns_the_same_bytes(twin: ModuleType) -> None:
    raw = response([3, 4])
    assert with_counts(raw, {MessageId(9, 9): 2}, "t") is raw
    assert RedeliveryCounts().stamp(raw, "t") is raw


def test_counts_follow_redeliveries_rewinds_acks_and_resets() -> None:
    counts = RedeliveryCounts()
    ids = [MessageId(1, i) for i in range(5)]
    counts.again(ids[:2])
    counts.again(ids[:1])
    assert counts.counts == {ids[0]: 2, ids[1]: 1}
    counts.rewind(ids[3])  # delivery had reached 1:3
    counts.replayed(ids[:3], ids[2])  # a step gave 1:0..1:2 again, not yet past 1:3
    assert counts.replay_upto == ids[3]
    counts.replayed([ids[3], ids[4]], ids[4])  # 1:4 is new: not counted; the replay ends
    assert counts.counts == {ids[0]: 3, ids[1]: 2, ids[2]: 1, ids[3]: 1}
    assert counts.replay_upto is None
    counts.acknowledged(ids[1], cumulative=True)
    assert counts.counts == {ids[2]: 1, ids[3]: 1}
    counts.acknowledged(ids[3], cumulative=False)
    counts.forget([ids[2]])
    assert counts.counts == {}
    counts.again(ids)
    counts.rewind(ids[4])
    counts.clear()
    assert (counts.counts, counts.replay_upto) == ({}, None)
