"""``df.write.format("compactlog")``: string and binary columns, the topic as an option
or a column, properties and event times; what a gRPC Read then returns; readable
refusals; a topic read through the source and written back."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Wire, df_rows, source

pytestmark = pytest.mark.spark

UTC = datetime.UTC


def write(df: Any, address: str, **options: str) -> None:
    df.write.format("compactlog").mode("append").option("server", address).options(**options).save()


def payload(rows: list[Any]) -> list[tuple[Any, ...]]:
    """key, value, properties, event time of gRPC rows."""
    return [(r[0], r[1], r[8], r[7]) for r in rows]


def test_write_string_and_binary_columns(spark: Any, wire: Wire) -> None:
    ledger = wire.create("sw-ledger")
    segmented = wire.create("sw-seg", kind=pb.SEGMENTED)
    strings = spark.createDataFrame(
        [("a", "1"), (None, "keyless"), ("b", None), ("é", "ü")], "key STRING, value STRING"
    ).coalesce(1)
    write(strings, wire.address, topic=ledger)
    assert [r[:2] for r in wire.read(ledger)] == [
        (b"a", b"1"),
        (None, b"keyless"),
        (b"b", None),
        ("é".encode(), "ü".encode()),
    ]

    when = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    when_ms = round(when.timestamp() * 1000)
    binary = spark.createDataFrame(
        [
            (b"k1", b"v1", segmented, {"p": "1"}, when),
            (b"k2", b"", ledger, None, None),
            (None, b"\x00\xff", segmented, {}, when),
        ],
        "key BINARY, value BINARY, topic STRING, properties MAP<STRING,STRING>, "
        "event_time TIMESTAMP",
    ).coalesce(1)
    write(binary, wire.address)  # the topic column routes each row
    seg_rows = wire.read(segmented)
    assert payload(seg_rows) == [
        (b"k1", b"v1", {"p": "1"}, when_ms),
        (None, b"\x00\xff", {}, when_ms),
    ]
    last = wire.read(ledger)[-1]
    assert (last[0], last[1], last[8], last[7]) == (b"k2", b"", {}, last[6])  # no event time

    many = spark.range(2500).selectExpr(
        "cast(id as string) as key", "cast(id * 2 as string) as value", "id + 1 as event_time"
    )
    write(many, wire.address, topic=segmented)  # a long column is milliseconds
    got = {(r[0], r[1], r[7]) for r in wire.read(segmented)[2:]}
    assert got == {(b"%d" % i, b"%d" % (2 * i), i + 1) for i in range(2500)}


def test_round_trip_through_the_source(spark: Any, wire: Wire) -> None:
    origin = wire.create("sw-origin", ledger_max_entries="5")
    copy = wire.create("sw-copy", kind=pb.SEGMENTED)
    wire.publish(
        origin,
        [
            pb.Record(key=b"a", value=b"1", properties={"x": "y"}, event_time_ms=1234),
            pb.Record(value=b"keyless"),
            pb.Record(key=b"a"),
        ]
        * 4,
    )
    df = source(spark, wire.address, origin)
    write(df, wire.address, topic=copy)  # the option wins over the topic column
    before = [(r[0], r[1], r[7], r[8]) for r in df_rows(df)]
    after = [(r[0], r[1], r[7], r[8]) for r in wire.read(copy)]
    assert after == before  # same keys, values, event times (1234 or the publish time), properties


@pytest.mark.parametrize(
    ("mode", "topic", "message"),
    [
        ("overwrite", "sw-ledger", "only appends"),
        ("append", "sw-nope", "topic 'sw-nope' does not exist"),
    ],
)
def test_write_refusals(spark: Any, wire: Wire, mode: str, topic: str, message: str) -> None:
    """The column checks: tests/spark/test_options.py."""
    df = spark.createDataFrame([], "key STRING, value STRING")
    writer = df.write.format("compactlog").mode(mode).option("server", wire.address)
    with pytest.raises(Exception, match=message):
        writer.option("topic", topic).save()
