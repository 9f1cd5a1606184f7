"""Options checked as Spark's Kafka source checks them, in real queries: an unknown option
fails with the known ones listed (names case-insensitive), a batch query refuses a
``latest`` start or an ``earliest`` end (also per topic partition), a start after its end
and a position of the wrong kind; SEGMENTED positions may be bare offsets."""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Wire, records, source

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def topics(shared_server: Any) -> tuple[str, str]:
    """A LEDGER topic and a SEGMENTED one of 10 messages each."""
    wire = Wire(shared_server.address)
    ledger = wire.create("kc-ledger")
    segmented = wire.create("kc-seg", kind=pb.SEGMENTED)
    for topic in (ledger, segmented):
        wire.publish(topic, records(10, 4))
    wire.close()
    return ledger, segmented


def entries(df: Any) -> list[int]:
    return sorted(r.entry_id for r in df.select("entry_id").collect())


def test_unknown_option_fails_listing_the_known_ones(
    spark: Any, wire: Wire, topics: tuple[str, str]
) -> None:
    """A misspelt readCompacted used to read the raw log without a word."""
    ledger, _ = topics
    wrong = r"(?i)unknown option 'readCompcated'.*did you mean 'readCompacted'.*known options: top"
    with pytest.raises(Exception, match=wrong):
        source(spark, wire.address, ledger, readCompcated="true").collect()
    with pytest.raises(
        Exception,
        match=r"'subscribe' for a compactlog read \(Kafka's source name; compactlog's is 'topic'",
    ):
        source(spark, wire.address, ledger, subscribe=ledger).collect()
    df = spark.createDataFrame([("k", "v")], "key STRING, value STRING")
    writer = df.write.format("compactlog").mode("append").option("server", wire.address)
    with pytest.raises(Exception, match="unknown option 'topics' for a compactlog write"):
        writer.option("topics", ledger).save()
    # names are case-insensitive, as Spark passes them
    first_ledger = wire.read(ledger)[0][4]  # the shared server's other topics took ids too
    start = f'{{"kc-ledger": {{"-1": "{first_ledger}:4"}}}}'
    upper = source(spark, wire.address, ledger, STARTINGOFFSETS=start)
    assert entries(upper) == list(range(4, 10))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "latest"}, "'startingOffsets' can't be 'latest' for a batch"),
        ({"endingOffsets": "earliest"}, "'endingOffsets' can't be 'earliest' for a batch"),
        (
            {"startingOffsets": '{"kc-seg": {"-1": -1}}'},
            "'startingOffsets': the start of topic 'kc-seg' partition -1 can't be 'latest'",
        ),
        (
            {"endingOffsets": '{"kc-seg": {"-1": -2}}'},
            "'endingOffsets': the end of topic 'kc-seg' partition -1 can't be 'earliest'",
        ),
        (
            {"startingOffsets": '{"kc-seg": {"-1": 7}}', "endingOffsets": '{"kc-seg": {"-1": 5}}'},
            r"'startingOffsets', topic 'kc-seg', partition -1: the start \(0:7\) is after the "
            r"end \(0:5",
        ),
        (
            {"startingOffsets": '{"kc-seg": {"-1": 11}}'},
            r"the start \(0:11\) is after the end \(0:10",
        ),
        (
            {"startingOffsets": '{"kc-seg": {"-1": "3:5"}}'},
            "'startingOffsets', topic 'kc-seg', partition -1: '3:5' is not a position of a "
            "SEGMENTED topic",
        ),
        (
            {"endingOffsets": '{"kc-seg": {"-1": -7}}'},
            "-7 is not an offset",
        ),
    ],
)
def test_batch_bounds_refused_naming_the_option(
    spark: Any, wire: Wire, topics: tuple[str, str], options: dict[str, str], message: str
) -> None:
    """They all used to return an empty DataFrame (or a server error naming no option)."""
    with pytest.raises(Exception, match=message):
        source(spark, wire.address, "kc-seg", **options).collect()


def test_offset_on_a_ledger_topic_is_the_wrong_kind(
    spark: Any, wire: Wire, topics: tuple[str, str]
) -> None:
    ledger, _ = topics
    start = '{"kc-ledger": {"-1": 3}}'
    with pytest.raises(Exception, match="3 is an offset, but the topic is a LEDGER topic"):
        source(spark, wire.address, ledger, startingOffsets=start).collect()


def test_bare_offsets_on_segmented_topics(spark: Any, wire: Wire, topics: tuple[str, str]) -> None:
    """Kafka's JSON: an offset, -2 for earliest, -1 for latest."""
    _, segmented = topics
    both = f"{segmented},kc-ledger"
    df = source(
        spark,
        wire.address,
        both,
        startingOffsets='{"kc-seg": {"-1": 3}, "kc-ledger": {"-1": -2}}',
        endingOffsets='{"kc-seg": {"-1": 7}, "kc-ledger": {"-1": -1}}',
    )
    rows = df.select("topic", "entry_id").collect()
    assert sorted(r.entry_id for r in rows if r.topic == segmented) == [3, 4, 5, 6]
    assert len([r for r in rows if r.topic == "kc-ledger"]) == 10
    same = source(spark, wire.address, segmented, startingOffsets='{"kc-seg": {"-1": "0:3"}}')
    assert entries(same) == list(range(3, 10))
