"""Helpers for the ``compactlog`` data source's tests: a server's stubs, and rows of the
source's columns from both sides (a DataFrame, a gRPC Read) in one comparable shape."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from typing import Any

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

# A local Spark session in a child program's script (tests that need a fresh JVM, or a
# program of their own), after ``from pyspark.sql import SparkSession``.
SCRIPT_SESSION = """
spark = (
    SparkSession.builder.master("local[1]")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.driver.host", "127.0.0.1")
    .getOrCreate()
)
"""

# key, value, topic, partition, ledger_id, entry_id, publish ms, event ms, properties
Row = tuple[bytes | None, bytes | None, str, int, int, int, int, int, dict[str, str]]


class Wire:
    """Raw stubs of one server, for setting topics up and reading them the gRPC way."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def create(self, topic: str, kind: int = pb.LEDGER, **config: str) -> str:
        cfg = {k.replace("_", "."): v for k, v in config.items()}
        self.admin.CreateTopic(pb.CreateTopicRequest(name=topic, kind=kind, config=cfg))
        return topic

    def publish(self, topic: str, records: Sequence[pb.Record], per_request: int = 0) -> None:
        step = per_request or len(records) or 1
        for i in range(0, len(records), step):
            req = pb.PublishRequest(topic=topic, records=records[i : i + step])
            self.log.Publish(req, timeout=30)

    def compact(self, topic: str) -> None:
        self.admin.Compact(pb.CompactRequest(topic=topic, wait=True), timeout=60)

    def read(
        self, topic: str, compacted: bool = False, start: tuple[int, int] | None = None
    ) -> list[Row]:
        req = pb.ReadRequest(topic=topic, read_compacted=compacted)
        if start is not None:
            req.message_id.ledger_id, req.message_id.entry_id = start
        return [grpc_row(topic, m) for r in self.log.Read(req, timeout=60) for m in r.messages]

    def close(self) -> None:
        self.channel.close()


def grpc_row(topic: str, m: pb.Message) -> Row:
    """A gRPC message as the source shows it (event time 0: the publish time)."""
    return (
        m.key if m.HasField("key") else None,
        m.value if m.HasField("value") else None,
        topic,
        -1,
        m.id.ledger_id,
        m.id.entry_id,
        m.publish_time_ms,
        m.event_time_ms or m.publish_time_ms,
        dict(m.properties),
    )


def df_rows(df: Any) -> list[Row]:
    """A DataFrame of the source's columns, ordered as a Read returns them."""
    out = []
    for r in df.orderBy("topic", "partition", "ledger_id", "entry_id").collect():
        out.append(
            (
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
                r.topic,
                r.partition,
                r.ledger_id,
                r.entry_id,
                ms(r.publish_time),
                ms(r.event_time),
                dict(r.properties or {}),
            )
        )
    return out


def arrow_row(r: dict[str, Any]) -> Row:
    """A row of one of the source's Arrow batches (``to_pylist``) in the same shape."""
    return (
        r["key"],
        r["value"],
        r["topic"],
        r["partition"],
        r["ledger_id"],
        r["entry_id"],
        ms(r["publish_time"]),
        ms(r["event_time"]),
        dict(r["properties"]),
    )


def ms(ts: object) -> int:
    assert isinstance(ts, datetime.datetime)
    aware = ts if ts.tzinfo else ts.astimezone()  # Spark returns session-local naive times
    return round(aware.timestamp() * 1000)


def records(n: int, keys: int, start: int = 0) -> list[pb.Record]:
    """Keyed and keyless records, null and empty values, properties, event times (0 on
    some: "use publish time")."""
    out = []
    for i in range(start, start + n):
        r = pb.Record(properties={"i": str(i)} if i % 3 == 0 else {})
        if i % 4:
            r.event_time_ms = 1_700_000_000_000 + i
        if i % 11 != 5:
            r.key = b"k%d" % (i % keys)
        if i % 7 == 3:
            pass  # null value: a tombstone when keyed
        elif i % 13 == 4:
            r.value = b""  # LEDGER: tombstone; SEGMENTED: an ordinary empty value
        else:
            r.value = b"v%d" % i
        out.append(r)
    return out


@pytest.fixture
def wire(shared_server: Any) -> Iterator[Wire]:
    w = Wire(shared_server.address)
    yield w
    w.close()


def source(spark: Any, address: str, topic: str, **options: str) -> Any:
    """``spark.read.format("compactlog")`` with ``options`` (camelCase names)."""
    reader = spark.read.format("compactlog").option("server", address).option("topic", topic)
    return reader.options(**options).load()
