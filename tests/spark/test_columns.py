"""The column builder's twins on real Read responses and on generated ones: the same
buffers byte for byte, the same rows a gRPC reader sees, the same refusal of bad bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.errors import CorruptData
from compactlog.records import MessageId
from compactlog.spark import _columns_py, columns
from compactlog.spark.columns import arrow_schema, response_columns
from compactlog.spark.connection import CHANNEL_OPTIONS, READ_METHOD
from compactlog.spark.offsets import TopicPartition
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Wire, arrow_row, grpc_row, records

SCHEMA = arrow_schema()
NO_END = (1 << 64) - 1
IDS = st.integers(0, (1 << 63) - 1)  # Spark's long; no server gives out more
MILLIS = st.integers(-62_000_000_000_000, 253_000_000_000_000)  # years 5 to 9987
TEXT = st.text(max_size=5)


@pytest.fixture(scope="module")
def compiled() -> object:
    """The compiled twin; the pure one again under ``COMPACTLOG_NO_EXT=1`` (as without a
    compiler), so the cases still check it against protobuf."""
    if os.environ.get("COMPACTLOG_NO_EXT") == "1":
        return _columns_py
    from compactlog.spark import _columns  # type: ignore[attr-defined]

    return _columns


def raw_responses(address: str, topic: str) -> Iterator[bytes]:
    """The Read responses of the whole topic as the server sent them."""
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        read = channel.unary_stream(READ_METHOD)
        yield from read(pb.ReadRequest(topic=topic).SerializeToString(), timeout=60)


def both(compiled: object, data: bytes, end: tuple[int, int] = (NO_END, NO_END)) -> tuple:  # type: ignore[type-arg]
    out = compiled.columns(data, *end)  # type: ignore[attr-defined]
    assert _columns_py.columns(data, *end) == out
    return out  # type: ignore[no-any-return]


def batch_rows(data: bytes, end: MessageId) -> list[tuple[object, ...]]:
    cols = response_columns(TopicPartition("t", -1), data, end, SCHEMA)
    return [] if cols.batch is None else [arrow_row(r) for r in cols.batch.to_pylist()]


def test_real_responses_give_the_grpc_rows(compiled: object, wire: Wire) -> None:
    topic = wire.create("cols-real", ledger_max_entries="40")
    wire.publish(topic, records(300, 17), per_request=23)
    responses = list(raw_responses(wire.address, topic))
    expected = wire.read(topic)
    got = []
    for data in responses:
        rows, stopped = both(compiled, data)[:2]
        assert not stopped
        got += batch_rows(data, MessageId(NO_END, NO_END))
    assert [(*r[:2], *r[3:]) for r in got] == [(*r[:2], *r[3:]) for r in expected]
    assert len(got) == 300

    # The range's end cuts inside a response: the rows before it, and "stopped".
    whole = b"".join(responses)
    end = expected[150][4:6]
    rows, stopped, last_ledger, last_entry = both(compiled, whole, end)[:4]
    assert (rows, stopped, (last_ledger, last_entry)) == (150, True, expected[149][4:6])
    assert [r[5] for r in batch_rows(whole, MessageId(*end))] == [r[5] for r in expected[:150]]


def message(parts: tuple) -> pb.Message:  # type: ignore[type-arg]
    ledger, entry, key, value, props, publish, event, redelivery = parts
    m = pb.Message(properties=props, publish_time_ms=publish, event_time_ms=event)
    m.id.ledger_id, m.id.entry_id, m.redelivery_count = ledger, entry, redelivery
    if key is not None:
        m.key = key
    if value is not None:
        m.value = value
    return m


MESSAGES = st.lists(
    st.tuples(
        IDS, IDS, st.none() | st.binary(max_size=6), st.none() | st.binary(max_size=6),
        st.dictionaries(TEXT, TEXT, max_size=3), MILLIS, MILLIS, st.integers(0, 5),
    ),
    max_size=20,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(MESSAGES, st.integers(0, 25))
def test_generated_responses_match_protobuf(compiled: object, parts: list, cut: int) -> None:  # type: ignore[type-arg]
    msgs = [message(p) for p in parts]
    data = pb.ReadResponse(messages=msgs).SerializeToString()
    expected = [grpc_row("t", m) for m in msgs]
    rows = both(compiled, data)[0]
    assert rows == len(msgs)
    got = batch_rows(data, MessageId(NO_END, NO_END))
    assert [(*r[:2], *r[3:]) for r in got] == [(*r[:2], *r[3:]) for r in expected]
    # ids need not ascend here: the walk stops at the first at or past the end
    end = (msgs[cut].id.ledger_id, msgs[cut].id.entry_id) if cut < len(msgs) else (0, 0)
    taken = next(
        (i for i, m in enumerate(msgs) if (m.id.ledger_id, m.id.entry_id) >= end), len(msgs)
    )
    assert both(compiled, data, end)[:2] == (taken, taken < len(msgs))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_bad_bytes_fail_alike(compiled: object, data: st.DataObject) -> None:
    msgs = [message((1, i, b"k", b"v", {"a": "b"}, 5, 6, 0)) for i in range(3)]
    good = pb.ReadResponse(messages=msgs).SerializeToString()
    cut = data.draw(st.integers(0, len(good) - 1))
    flip = data.draw(st.integers(0, 255))
    bad = data.draw(st.sampled_from([good[:cut], good[:cut] + bytes([flip]) + good[cut + 1 :]]))
    outcomes = []
    for twin in (compiled, _columns_py):
        try:
            outcomes.append(twin.columns(bad, NO_END, NO_END))  # type: ignore[attr-defined]
        except _columns_py.MalformedResponse as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]


def test_a_response_that_does_not_parse_is_corrupt_data() -> None:
    with pytest.raises(CorruptData, match=r"'t'.*does not parse: field runs past"):
        response_columns(TopicPartition("t", -1), b"\x0a\x05\x0a", MessageId(1, 1), SCHEMA)
    assert response_columns(TopicPartition("t", -1), b"", MessageId(1, 1), SCHEMA).batch is None
    assert columns.builder is not None


READ_IN_A_FRESH_PROCESS = """
import sys
from compactlog.records import MessageId
from compactlog.spark.columns import arrow_schema
from compactlog.spark.offsets import TopicPartition
from compactlog.spark.options import connection
from compactlog.spark.planning import ReadRange
from compactlog.spark.source import read_range

rng = ReadRange(TopicPartition(sys.argv[2], -1), MessageId(0, 0), MessageId(1 << 62, 0), False)
with connection({"server": sys.argv[1]}).calls() as calls:
    rows = sum(b.num_rows for b in read_range(calls, rng, True, arrow_schema()))
print(rows, "pandas" in sys.modules)
"""


def test_constant_columns_and_no_pandas_in_a_worker(wire: Wire) -> None:
    """``topic`` and ``partition`` hold the name given and the index on every row; a
    fresh process reading through the source imports no pandas (``pa.scalar`` did:
    about 1 s of every fresh Spark Python worker on the loaded 2-core box)."""
    topic, partition = columns.constant_columns(TopicPartition("prices", 4), 3)
    topic.validate(full=True)
    partition.validate(full=True)
    assert (topic.to_pylist(), partition.to_pylist()) == (["prices"] * 3, [4] * 3)
    name = wire.create("cols-fresh")
    wire.publish(name, records(30, 7))
    args = [sys.executable, "-c", READ_IN_A_FRESH_PROCESS, wire.address, name]
    run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["30", "False"], run.stderr[-2000:]
