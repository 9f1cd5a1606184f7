"""The JVM batch reader behind ``format("compactlog")`` (``compactlog/spark/jvm``): the
common batch read goes to its columnar scan and returns exactly the Python source's rows
(``compactlog-python``, the same session); every other read, the streams and the writes
go to the Python source, with its answers and its errors. The JVM reader is on in the
shared session (javac is on this box and in CI): tests/spark as a whole runs through it."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from compactlog.client import Client
from compactlog.spark import PYTHON_NAME
from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import write_tokens_file
from .conftest import Wire, df_rows, records, source

pytestmark = pytest.mark.spark

JVM_SCAN = "compactlog JVM scan"
SOURCES = ("compactlog", PYTHON_NAME)


def plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def named(spark: Any, name: str, address: str, topic: str, **options: str) -> Any:
    """``spark.read.format(name)`` of ``topic`` with ``options``."""
    reader = spark.read.format(name).option("server", address).option("topic", topic)
    return reader.options(**options).load()


@pytest.fixture(scope="module")
def topics(shared_server: Any) -> dict[str, str]:
    """A LEDGER topic of several ledgers, compacted with a raw tail; a SEGMENTED one;
    a partitioned one: null keys and values, properties, event times in all."""
    wire = Wire(shared_server.address)
    try:
        ledger = wire.create("jvm-ledger", ledger_max_entries="64")
        wire.publish(ledger, records(300, 40), per_request=50)
        wire.compact(ledger)
        wire.publish(ledger, records(90, 40, start=300))
        seg = wire.create("jvm-seg", kind=pb.SEGMENTED, segment_bytes="2048")
        wire.publish(seg, records(250, 20), per_request=10)
        parts = "jvm-parts"
        wire.admin.CreateTopic(pb.CreateTopicRequest(name=parts, partitions=3))
        wire.publish(parts, records(120, 30), per_request=40)
    finally:
        wire.close()
    return {"ledger": ledger, "seg": seg, "parts": parts}


@pytest.mark.parametrize(
    ("names", "options"),
    [
        ("ledger", {}),
        ("ledger", {"readCompacted": "true"}),
        ("ledger", {"entriesPerPartition": "100"}),
        ("seg", {"entriesPerPartition": "37"}),
        ("parts", {}),
        ("ledger,seg,parts", {"minPartitions": "9", "readCompacted": "false"}),
        ("seg", {"tlsCa": "", "token": ""}),  # the Spark engine's export passes these
    ],
)
def test_the_jvm_scan_returns_the_python_sources_rows(
    spark: Any, wire: Wire, topics: dict[str, str], names: str, options: dict[str, str]
) -> None:
    topic = ",".join(topics[n] for n in names.split(","))
    df = source(spark, wire.address, topic, **options)
    assert JVM_SCAN in plan(df) and "ColumnarToRow" in plan(df)
    python = named(spark, PYTHON_NAME, wire.address, topic, **options)
    assert JVM_SCAN not in plan(python)
    rows = df_rows(df)
    assert rows and rows == df_rows(python)
    assert df.rdd.getNumPartitions() == python.rdd.getNumPartitions()
    assert any(r[0] is None for r in rows) and any(r[1] is None for r in rows)
    assert any(r[8] for r in rows) and any(r[6] != r[7] for r in rows)


def test_a_pruned_read_and_its_values(spark: Any, wire: Wire, topics: dict[str, str]) -> None:
    topic = topics["ledger"]
    df = source(spark, wire.address, topic).select("value", "ledger_id", "entry_id")
    assert JVM_SCAN in plan(df)
    got = [(r.ledger_id, r.entry_id, r.value) for r in df.collect()]
    got = sorted((lg, e, None if v is None else bytes(v)) for lg, e, v in got)
    assert got == [(row[4], row[5], row[1]) for row in wire.read(topic)]


def test_other_reads_go_to_the_python_source(
    spark: Any, wire: Wire, topics: dict[str, str]
) -> None:
    topic = topics["seg"]
    rows = wire.read(topic)
    cases = [  # (options, the JVM scan's?, the rows)
        ({"startingOffsets": json.dumps({topic: {"-1": 5}})}, False, rows[5:]),
        ({"endingOffsets": json.dumps({topic: {"-1": "0:12"}})}, False, rows[:12]),
        ({"failOnDataLoss": "false"}, False, rows),
        ({"readCompacted": "TRUE "}, True, wire.read(topic, True)),
        ({"minPartitions": "3", "startingOffsets": "earliest"}, True, rows),
    ]
    for options, jvm, want in cases:
        df = source(spark, wire.address, topic, **options)
        assert (JVM_SCAN in plan(df)) == jvm, options
        assert df_rows(df) == want, options


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "jvm-no-such-topic"}, "topic 'jvm-no-such-topic' does not exist"),
        ({"topic": "jvm-ledger,jvm-gone"}, "topic 'jvm-gone' does not exist"),
        ({"topic": " , "}, "option 'topic' names no topic"),
        ({"topic": "jvm-ledger", "readCompacted": "yes"}, "'readCompacted' is 'true' or"),
        ({"topic": "jvm-ledger", "entriesPerPartition": "0"}, "'entriesPerPartition' is a"),
        ({"topic": "jvm-ledger", "startingOffsets": "latest"}, "can't be 'latest'"),
        ({"topic": "jvm-ledger", "subscribe": "x"}, "Kafka's source name"),
        ({"topic": "jvm-ledger", "tlsCa": "/jvm/no/ca.pem"}, "option 'tlsCa'"),
    ],
)
def test_errors_are_the_python_sources(
    spark: Any, wire: Wire, topics: dict[str, str], options: dict[str, str], message: str
) -> None:
    for name in SOURCES:
        reader = spark.read.format(name).option("server", wire.address)
        with pytest.raises(Exception, match=message):
            reader.options(**options).load().collect()


def test_a_server_that_is_down_fails_as_today(spark: Any) -> None:
    for name in SOURCES:
        reader = spark.read.format(name).option("server", "127.0.0.1:1").option("topic", "t")
        with pytest.raises(Exception, match=r"127\.0\.0\.1:1"):
            reader.load().collect()


def test_a_users_schema_goes_to_the_python_source(spark: Any, wire: Wire) -> None:
    reader = spark.read.format("compactlog").schema("value BINARY")
    reader = reader.option("server", wire.address).option("topic", "jvm-ledger")
    with pytest.raises(Exception, match="fixed columns"):
        reader.load().collect()


def test_registering_again_keeps_the_jvm_reader(
    spark: Any, wire: Wire, topics: dict[str, str]
) -> None:
    import compactlog.spark

    compactlog.spark.register(spark)
    df = source(spark, wire.address, topics["ledger"])
    assert JVM_SCAN in plan(df)
    assert df.count() == 390


def test_switched_off_where_the_jar_is_in_already(
    spark: Any,
    wire: Wire,
    topics: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The switch turns the reader off for sessions registered after it; a session whose
    classpath has the jar already (added before, or ``spark.jars``) keeps it."""
    import compactlog.spark

    monkeypatch.setenv("COMPACTLOG_SPARK_JVM", "0")
    with caplog.at_level(logging.WARNING, logger="compactlog.spark"):
        compactlog.spark.register(spark)
    assert [r.getMessage() for r in caplog.records] == [
        "compactlog: the Python source reads format('compactlog'): "
        "COMPACTLOG_SPARK_JVM=0 turns it off",
        "compactlog: but the JVM reader was in this session already: it stays",
    ]
    for name, scan in zip(SOURCES, (True, False), strict=True):
        df = named(spark, name, wire.address, topics["ledger"])
        assert (JVM_SCAN in plan(df)) == scan
        assert df.count() == 390


def test_a_dataframe_keeps_the_ranges_of_its_first_query(spark: Any, wire: Wire) -> None:
    """Batch queries fix their ranges when planned, in both sources: a DataFrame read
    again reads the same messages, not those published since."""
    topic = wire.create("jvm-fixed")
    wire.publish(topic, records(20, 5))
    dfs = [named(spark, name, wire.address, topic) for name in SOURCES]
    assert [df.count() for df in dfs] == [20, 20]
    wire.publish(topic, records(10, 5, start=20))
    assert [df.select("value").count() for df in dfs] == [20, 20]
    assert [named(spark, name, wire.address, topic).count() for name in SOURCES] == [30, 30]


def test_a_start_removed_after_planning_is_data_loss(spark: Any, wire: Wire) -> None:
    """DeleteRecords passes a SEGMENTED range's start after the query was planned, before
    its task reads: both sources fail the task with Kafka's failOnDataLoss message (the
    JVM reader asks GetTopic for the new log start, as the Python source does), not the
    server's OUT_OF_RANGE status; the JVM's as an IllegalStateException, as Spark's Kafka
    source raises its data loss."""
    for name in SOURCES:
        topic = wire.create(f"jvm-lost-{name}", kind=pb.SEGMENTED)
        wire.publish(topic, records(10, 4))
        df = named(spark, name, wire.address, topic)
        assert (JVM_SCAN in plan(df)) == (name == "compactlog")
        assert df.count() == 10  # the first query fixed the ranges: from offset 0
        wire.admin.DeleteRecords(pb.DeleteRecordsRequest(topic=topic, before_offset=6))
        with pytest.raises(Exception) as raised:
            df.collect()
        lost = (
            f"topic '{topic}' partition -1: offsets 0 to 5 are gone (retention or "
            "DeleteRecords moved the log start to 6); the query was to read from offset 0. "
            "Some data may have been lost; to read from the log start instead, set the "
            "source option failOnDataLoss to false"
        )
        assert lost in str(raised.value), name
        if name == "compactlog":
            assert f"java.lang.IllegalStateException: {lost}" in str(raised.value)
        again = named(spark, name, wire.address, topic).collect()
        assert [r.entry_id for r in again] == [6, 7, 8, 9]


def test_tokens_over_plaintext(spark: Any, server_factory: Any, tmp_path: Path) -> None:
    """A ``reader`` token reads through the JVM scan, planned without the admin-only
    layout (one Spark partition per topic partition, as the Python source); a token the
    server does not know fails as the Python source fails it."""
    tokens = write_tokens_file(
        tmp_path / "tokens.toml", {"ops": ("ops-token", "admin"), "bi": ("bi-token", "reader")}
    )
    srv = server_factory(extra_args=["--auth-tokens", str(tokens)])
    with Client(srv.address, token="ops-token") as admin:
        admin.create_topic("jvm-tokens", config={"ledger.max.entries": 10})
        admin.producer("jvm-tokens").send_batch([(b"k%d" % i, b"v%d" % i) for i in range(35)])
    options = {"token": "bi-token", "entriesPerPartition": "10"}
    dfs = [named(spark, name, srv.address, "jvm-tokens", **options) for name in SOURCES]
    assert JVM_SCAN in plan(dfs[0])
    assert [df.rdd.getNumPartitions() for df in dfs] == [1, 1]  # four ledgers, no layout
    assert df_rows(dfs[0]) == df_rows(dfs[1]) and len(df_rows(dfs[0])) == 35
    for name in SOURCES:
        df = named(spark, name, srv.address, "jvm-tokens", token="nobody's")
        with pytest.raises(Exception, match=r"Unauthenticated|UNAUTHENTICATED"):
            df.collect()
