"""The source's options and offsets, checked without Spark: defaults as Kafka's source,
JSON positions, and a message naming the option for every mistake."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from compactlog.errors import InvalidArgument
from compactlog.records import MessageId
from compactlog.spark.offsets import (
    TopicPartition,
    from_checkpoint,
    parse_position,
    parse_spec,
    snapshot_offset,
    to_offset,
)
from compactlog.spark.options import ReadOptions, WriteOptions, topic_names

BASE = {"server": "127.0.0.1:1", "topic": "a"}


def test_defaults_as_kafka_source() -> None:
    batch = ReadOptions.parse(BASE, streaming=False)
    stream = ReadOptions.parse(BASE, streaming=True)
    assert (batch.starting.default, batch.ending.default) == ("earliest", "latest")
    assert stream.starting.default == "latest"
    assert not batch.compacted
    assert batch.topics == ("a",)
    assert ReadOptions.parse({**BASE, "readcompacted": "TRUE"}, streaming=False).compacted


def test_positions_in_json() -> None:
    spec = parse_spec(
        "startingOffsets",
        '{"a": {"-1": "3:7"}, "b": {"0": "earliest", "1": -1, "2": "0:5"}}',
        "earliest",
        ("a", "b", "c"),
    )
    assert spec.bound(TopicPartition("a", -1)) == MessageId(3, 7)
    assert spec.bound(TopicPartition("b", 0)) == "earliest"
    assert spec.bound(TopicPartition("b", 1)) == "latest"  # Kafka's -1
    assert spec.bound(TopicPartition("b", 2)) == MessageId(0, 5)
    assert spec.bound(TopicPartition("c", -1)) == "earliest"  # not named: the default
    offsets = {TopicPartition("b", 1): MessageId(2, 0), TopicPartition("a", -1): MessageId(1, 9)}
    assert to_offset(offsets) == {"a": {"-1": "1:9"}, "b": {"1": "2:0"}}
    assert from_checkpoint(to_offset(offsets)) == (offsets, frozenset())
    marked = snapshot_offset([TopicPartition("a", -1), TopicPartition("b", 0)])
    assert marked == {"a": {"-1": "snapshot"}, "b": {"0": "snapshot"}}
    assert from_checkpoint(marked) == ({}, {TopicPartition("a", -1), TopicPartition("b", 0)})
    assert TopicPartition("t", 3).log == "t-partition-3"
    assert TopicPartition("t", -1).log == "t"


def test_topic_names() -> None:
    assert topic_names(" a, b,,a ,c ") == ("a", "b", "c")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"server": "x:1"}, "needs option 'topic'"),
        ({"topic": "a"}, "needs option 'server'"),
        ({**BASE, "topic": " , "}, "names no topic"),
        ({**BASE, "readCompacted": "yes"}, "option 'readCompacted' is 'true' or 'false'"),
        ({**BASE, "startingOffsets": "first"}, "option 'startingOffsets' is 'earliest'"),
        ({**BASE, "startingOffsets": "[1]"}, "must be an object of topics"),
        ({**BASE, "startingOffsets": '{"b": {"-1": "1:0"}}'}, "topic 'b', which the 'topic'"),
        ({**BASE, "endingOffsets": '{"a": {"x": "1:0"}}'}, "partition 'x' is not an index"),
        ({**BASE, "endingOffsets": '{"a": {"-1": "1-0"}}'}, "'1-0' is not a position"),
        ({**BASE, "endingOffsets": '{"a": {"-1": true}}'}, "True is not a position"),
        ({**BASE, "entriesPerPartition": "0"}, "'entriesPerPartition' is a whole number"),
        ({**BASE, "minPartitions": "0"}, "'minPartitions' is a whole number >= 1, not '0'"),
        ({**BASE, "minPartitions": "-3"}, "'minPartitions' is a whole number >= 1, not '-3'"),
        ({**BASE, "minPartitions": "2.5"}, "'minPartitions' is a whole number >= 1, not '2.5'"),
        ({**BASE, "tlsCa": "/no/such/ca.pem"}, "option 'tlsCa': TLS CA file /no/such/ca.pem"),
    ],
)
def test_mistakes_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        ReadOptions.parse(options, streaming=False)


def test_streaming_takes_no_ending_offsets_and_writes_one_topic() -> None:
    with pytest.raises(InvalidArgument, match="'endingOffsets' applies to batch queries only"):
        ReadOptions.parse({**BASE, "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(InvalidArgument, match="one topic"):
        WriteOptions.parse({**BASE, "topic": "a,b"})
    assert WriteOptions.parse({"server": "x:1"}).topic is None


def test_token_and_ca_travel_with_the_connection(tls_files: Any) -> None:
    options = {**BASE, "token": " s3cret\n", "tlsCa": str(tls_files.ca)}
    conn = ReadOptions.parse(options, streaming=False).conn
    assert conn.security.token == "s3cret"
    assert conn.security.ca_pem == tls_files.ca.read_bytes()  # read here, on the driver
    assert "s3cret" not in repr(conn)
    assert ReadOptions.parse(BASE, streaming=False).conn.security.token is None
    assert parse_position(" 4:2 ") == MessageId(4, 2)


def test_importing_the_source_stays_light() -> None:
    """``import compactlog`` does not load the source; the source loads no PySpark
    until a session needs it."""
    code = (
        "import sys, compactlog; assert 'compactlog.spark' not in sys.modules; "
        "import compactlog.spark; print(sorted(m for m in sys.modules if m.startswith("
        "('pyspark', 'pyarrow', 'grpc'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("columns", "topic", "message"),
    [
        ("key STRING, value STRING", None, "'topic' option or a 'topic' column"),
        ("key STRING, value INT", "t", "column 'value' must be binary or string, not int"),
        ("key STRING", "t", "needs a 'value' column"),
        ("value BINARY, topic BINARY", None, "column 'topic' must be string"),
        ("value STRING, properties MAP<STRING,INT>", "t", "must be map<string,string>"),
        ("value STRING, event_time STRING", "t", "a timestamp or a long of milliseconds"),
    ],
)
def test_write_columns_are_checked(columns: str, topic: str | None, message: str) -> None:
    pytest.importorskip("pyspark")
    from compactlog.spark.writer import row_layout

    with pytest.raises(InvalidArgument, match=message):
        row_layout(_struct(columns), topic)


def test_write_columns_accepted() -> None:
    pytest.importorskip("pyspark")
    from compactlog.spark.writer import RowLayout, row_layout

    full = "key BINARY, value STRING, topic STRING, properties MAP<STRING,STRING>, event_time LONG"
    assert row_layout(_struct(full), None) == RowLayout(True, True, True, True)
    assert row_layout(_struct("value BINARY, other INT"), "t") == RowLayout(
        False, False, False, False
    )


def _struct(ddl: str) -> Any:
    """A StructType from simple ``name TYPE`` pairs, without a JVM."""
    from pyspark.sql import types as T

    kinds = {
        "STRING": T.StringType(),
        "BINARY": T.BinaryType(),
        "INT": T.IntegerType(),
        "LONG": T.LongType(),
        "MAP<STRING,STRING>": T.MapType(T.StringType(), T.StringType()),
        "MAP<STRING,INT>": T.MapType(T.StringType(), T.IntegerType()),
    }
    fields = [part.strip().split(" ", 1) for part in ddl.split(", ")]
    return T.StructType([T.StructField(name, kinds[kind]) for name, kind in fields])
