"""Store slots and the request peek the front routes by (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactlog.errors import CompactlogError, NotOwner
from compactlog.server.front.secret import FRONT_KEY
from compactlog.server.rpc.wire_peek import field_one, topic_of
from compactlog.server.shards.process import slot_admit
from compactlog.storage.slots import (
    SLOT_COUNT,
    Layout,
    Placement,
    choose_layout,
    read_layout,
    slot_of,
    slots_of_partitions,
    slots_of_shard,
)
from compactlog.v1 import compactlog_pb2 as pb


def test_slot_of_is_stable_and_keeps_partitions_with_their_topic() -> None:
    # Fixed values: a change here moves topics between stores of existing data dirs.
    assert [slot_of(name, 8) for name in ("a", "b", "orders", "")] == [3, 1, 6, 0]
    assert {slot_of(f"orders-partition-{i}", 8) for i in range(10)} == {6}


def test_every_slot_has_exactly_one_shard() -> None:
    for shards in range(1, SLOT_COUNT + 1):
        owned = [s for k in range(shards) for s in slots_of_shard(k, shards, SLOT_COUNT)]
        assert sorted(owned) == list(range(SLOT_COUNT))


def test_layouts(tmp_path: Path) -> None:
    assert choose_layout(tmp_path / "new1", 1) == Layout(0)
    assert choose_layout(tmp_path / "new2", 2) == Layout(SLOT_COUNT)
    assert read_layout(tmp_path / "new2") == Layout(SLOT_COUNT)
    assert choose_layout(tmp_path / "new2", 1) == Layout(SLOT_COUNT)  # slots, one shard
    single = tmp_path / "single"
    (single / "ledgers").mkdir(parents=True)
    with pytest.raises(CompactlogError, match="compactlog migrate --slots"):
        choose_layout(single, 2)
    with pytest.raises(CompactlogError, match="at most 8"):
        choose_layout(tmp_path / "new2", 9)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "SLOTS").write_text("eight\n")
    with pytest.raises(CompactlogError, match="SLOTS"):
        read_layout(tmp_path / "bad")


def test_the_peek_reads_field_one_without_parsing() -> None:
    publish = pb.PublishRequest(topic="prices", records=[pb.Record(key=b"k", value=b"v")])
    assert topic_of(publish.SerializeToString()) == "prices"
    read = pb.ReadRequest(max_messages=3, follow=True, topic="x")  # field 1 after others
    assert topic_of(read.SerializeToString()) == "x"
    assert topic_of(pb.ListTopicsRequest().SerializeToString()) is None
    seal = pb.SealLedgerRequest(ledger_id=300, expected_entries=2)
    assert field_one(seal.SerializeToString()) == 300
    assert topic_of(b"\x0a\xff") is None  # truncated: the parser will refuse it
    assert topic_of(b"\xff\xff\xff") is None


def test_a_slot_refuses_topics_of_other_slots() -> None:
    admit = slot_admit(slot_of("a", 8), 8)
    assert admit(pb.GetTopicRequest(name="a").SerializeToString(), "GetTopicRequest", ()) is None
    refusal = admit(pb.GetTopicRequest(name="b").SerializeToString(), "GetTopicRequest", ())
    assert isinstance(refusal, NotOwner)
    assert refusal.metadata == {"topic": "b", "slot": str(slot_of("b", 8))}
    assert admit(pb.ListTopicsRequest().SerializeToString(), "ListTopicsRequest", ()) is None


def test_partition_placement_spreads_a_topics_partitions_over_the_slots(tmp_path: Path) -> None:
    spread = Placement.PARTITION
    home = slot_of("orders", 8, spread)
    assert home == slot_of("orders", 8) == 6  # names that are not partitions: as before
    assert [slot_of(f"orders-partition-{i}", 8, spread) for i in range(10)] == [
        (6 + i) % 8 for i in range(10)
    ]
    assert slots_of_partitions("orders", 3, 8, spread) == [6, 7, 0]
    assert slots_of_partitions("orders", 20, 8, spread) == [6, 7, 0, 1, 2, 3, 4, 5]
    assert slots_of_partitions("orders", 3, 8, Placement.TOPIC) == [6]
    assert choose_layout(tmp_path / "d", 2, spread) == Layout(SLOT_COUNT, spread)
    assert (tmp_path / "d" / "PLACEMENT").read_text() == "partition\n"
    assert choose_layout(tmp_path / "d", 2) == Layout(SLOT_COUNT, spread)  # the dir's own
    assert choose_layout(tmp_path / "t", 2) == Layout(SLOT_COUNT, Placement.TOPIC)
    assert not (tmp_path / "t" / "PLACEMENT").exists()  # topic placement: no file, as before
    (tmp_path / "d" / "PLACEMENT").write_text("spread\n")
    with pytest.raises(CompactlogError, match="PLACEMENT"):
        read_layout(tmp_path / "d")


def test_under_partition_placement_a_spread_topic_answers_only_its_front() -> None:
    admit = slot_admit(6, 8, Placement.PARTITION, "s3cret", lambda name: name == "orders")
    mark = ((FRONT_KEY, "s3cret"),)

    def get(name: str, metadata: tuple[tuple[str, str], ...] = ()) -> CompactlogError | None:
        return admit(pb.GetTopicRequest(name=name).SerializeToString(), "GetTopicRequest", metadata)

    assert get("orders", mark) is None
    refusal = get("orders")
    assert isinstance(refusal, NotOwner) and "span several shards" in str(refusal)
    assert isinstance(get("orders", ((FRONT_KEY, "wrong"),)), NotOwner)
    assert get("orders-partition-0") is None  # a partition: its own slot answers anyone
    assert isinstance(get("orders-partition-1"), NotOwner)  # slot 7's
    assert get("orders-partition-1", mark) is None  # the front may ask any slot anything
    name = next(f"t{i}" for i in range(100) if slot_of(f"t{i}", 8) == 6)
    for partitions, refused in ((0, False), (2, True)):
        create = pb.CreateTopicRequest(name=name, partitions=partitions).SerializeToString()
        assert isinstance(admit(create, "CreateTopicRequest", ()), NotOwner) is refused
        assert admit(create, "CreateTopicRequest", mark) is None
    # Topic placement: a partitioned topic lives whole in its slot, no mark needed.
    whole = slot_admit(6, 8, Placement.TOPIC, "s3cret", lambda name: True)
    request = pb.GetTopicRequest(name="orders").SerializeToString()
    assert whole(request, "GetTopicRequest", ()) is None
