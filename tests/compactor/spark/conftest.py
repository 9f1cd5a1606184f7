"""One local Spark session for the whole test run, and gRPC helpers for the Spark tests.

Spark settings follow the project's test facts: ``local[2]``, UI off, 2 shuffle
partitions, driver bound to 127.0.0.1, workers on this interpreter, a JVM tuned for
start-up (serial GC, C1 only).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence

import pytest

from compactlog.compactor.two_phase.grpc_adapter import open_channel
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

pyspark = pytest.importorskip("pyspark")

JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"

Row = tuple[int, int, bytes | None, bytes | None, dict[str, str], int, int]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    from compactlog.compactor.spark import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("compactlog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


class Api:
    """Raw stubs of one server: admin, log and the compaction engine."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = open_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)
        self.engine = pb_grpc.CompactionEngineStub(self.channel)

    def create(self, topic: str, kind: int = pb.LEDGER, **config: str) -> None:
        cfg = {k.replace("_", "."): v for k, v in config.items()}
        self.admin.CreateTopic(pb.CreateTopicRequest(name=topic, kind=kind, config=cfg))

    def publish(self, topic: str, records: Sequence[pb.Record]) -> None:
        for i in range(0, len(records), 5000):
            self.log.Publish(pb.PublishRequest(topic=topic, records=records[i : i + 5000]))

    def read(self, topic: str, compacted: bool) -> list[Row]:
        req = pb.ReadRequest(topic=topic, read_compacted=compacted)
        return [as_row(m) for r in self.log.Read(req, timeout=60) for m in r.messages]

    def layout(self, topic: str) -> pb.TopicLayout:
        return self.engine.GetTopicLayout(pb.GetTopicLayoutRequest(topic=topic))

    def compacted_entries(self, topic: str) -> list[bytes]:
        """The current compacted ledger's entries, byte for byte."""
        lay = self.layout(topic)
        if not lay.compacted_ledger_id:
            return []
        meta = [r for r in lay.compacted_view if r.compacted]
        if not meta:
            return []
        req = pb.ReadEntriesRequest(topic=topic, range=meta[0])
        return [e for b in self.engine.ReadEntries(req) for e in b.entries]

    def status(self, topic: str) -> pb.CompactionStatus:
        return self.admin.GetCompactionStatus(pb.GetCompactionStatusRequest(topic=topic))

    def close(self) -> None:
        self.channel.close()


def as_row(m: pb.Message) -> Row:
    return (
        m.id.ledger_id,
        m.id.entry_id,
        m.key if m.HasField("key") else None,
        m.value if m.HasField("value") else None,
        dict(m.properties),
        m.publish_time_ms,
        m.event_time_ms,
    )


def df_rows(df: object) -> list[Row]:
    """A DataFrame of the ``compactlog`` schema as rows comparable with ``as_row``."""
    out = []
    for r in df.orderBy("ledger_id", "entry_id").collect():  # type: ignore[attr-defined]
        out.append(
            (
                r.ledger_id,
                r.entry_id,
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
                dict(r.properties or {}),
                _ms(r.publish_time),
                _ms(r.event_time),
            )
        )
    return out


def _ms(ts: object) -> int:
    import datetime

    assert isinstance(ts, datetime.datetime)
    aware = ts if ts.tzinfo else ts.astimezone()  # Spark returns session-local naive times
    return round(aware.timestamp() * 1000)


@pytest.fixture
def api() -> Iterator[object]:
    made: list[Api] = []

    def make(address: str) -> Api:
        made.append(Api(address))
        return made[-1]

    yield make
    for a in made:
        a.close()
