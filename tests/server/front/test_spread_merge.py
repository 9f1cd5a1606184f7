"""The front's merges of the slots' answers on a spread partitioned topic, over hand-built
answers (``server/front/spread/merge.py``); the real fan-out is in
``tests/e2e/test_spread_admin.py``."""

from __future__ import annotations

import pytest

from compactlog.errors import CompactlogError
from compactlog.partitioner import partition_name
from compactlog.server.admin.partitioned_compaction import aggregate
from compactlog.server.admin.subscriptions import merge_subscriptions
from compactlog.server.front.spread.merge import (
    merge_compaction,
    merge_topic_infos,
    merge_topic_lists,
    partition_map,
    partitions_in_slot,
)
from compactlog.storage.slots import Placement, slot_of, slots_of_partitions
from compactlog.v1 import compactlog_pb2 as pb

SPREAD = Placement.PARTITION
State = pb.CompactionStatus


def info(name: str, entries: int, config: str, partitions: int = 3) -> pb.TopicInfo:
    out = pb.TopicInfo(name=name, kind=pb.SEGMENTED, partitions=partitions)
    out.config["retention.ms"] = config
    s = out.stats
    s.entries, s.bytes, s.ledgers, s.segments = entries, 10 * entries, 1, 2
    s.compacted_entries, s.compacted_bytes = entries // 2, 5 * entries
    return out


def test_topic_infos_sum_the_figures_and_take_the_own_slots_config() -> None:
    merged = merge_topic_infos([info("t", 4, "own"), info("t", 6, "other")], partitions=7)
    assert merged.name == "t" and merged.kind == pb.SEGMENTED and merged.partitions == 7
    assert dict(merged.config) == {"retention.ms": "own"}
    s = merged.stats
    assert (s.entries, s.bytes, s.ledgers, s.segments) == (10, 100, 2, 4)
    assert (s.compacted_entries, s.compacted_bytes) == (5, 50)
    assert not merged.offline and not merged.offline_reason
    assert not s.HasField("first_id") and not s.HasField("last_id")


def test_offline_reasons_are_joined() -> None:
    bad = info("t", 0, "x")
    bad.offline, bad.offline_reason = True, "t-partition-1: bad checksum"
    worse = info("t", 0, "y")
    worse.offline, worse.offline_reason = True, "t-partition-2: missing segment"
    merged = merge_topic_infos([info("t", 1, "z"), bad, worse], partitions=3)
    assert merged.offline
    assert merged.offline_reason == "t-partition-1: bad checksum; t-partition-2: missing segment"


def test_no_answer_is_an_error_not_an_empty_topic() -> None:
    with pytest.raises(CompactlogError):
        merge_topic_infos([], partitions=2)


def test_lists_without_an_order_are_joined_by_name() -> None:
    a = pb.ListTopicsResponse(topics=[info("b", 1, "x"), info("d", 1, "x")])
    b = pb.ListTopicsResponse(topics=[info("a", 1, "x"), info("c", 1, "x")])
    merged = merge_topic_lists([a, b])
    assert [t.name for t in merged.topics] == ["a", "b", "c", "d"]


def test_lists_merge_one_spread_name_with_the_same_merge_in_slot_order() -> None:
    name, partitions = "prices", 4
    order = slots_of_partitions(name, partitions, 8, SPREAD)
    slots = sorted(order)
    # Every slot holding a partition lists NAME with its own figures; the own slot's
    # config is "own". The slots answer in slot number order, not in NAME's order.
    answers = []
    for slot in slots:
        own = slot == order[0]
        topics = [info(name, 1 + slot, "own" if own else f"slot {slot}", partitions)]
        topics.append(info(f"solo-{slot}", 1, "x", 0))
        answers.append(pb.ListTopicsResponse(topics=topics))
    merged = merge_topic_lists(answers, lambda n, p: slots_of_partitions(n, p, 8, SPREAD), slots)
    names = [t.name for t in merged.topics]
    assert names == sorted([name, *(f"solo-{s}" for s in slots)])
    entry = merged.topics[names.index(name)]
    expected = merge_topic_infos(
        [info(name, 1 + s, "own" if s == order[0] else f"slot {s}", partitions) for s in order],
        partitions,
    )
    assert entry == expected
    assert entry.config["retention.ms"] == "own"
    assert entry.stats.entries == sum(1 + s for s in slots)


@pytest.mark.parametrize("partitions", [2, 4, 8, 11, 20])
def test_partitions_in_slot_cover_every_partition_once(partitions: int) -> None:
    held = {
        slot: partitions_in_slot("t", partitions, slot, 8, SPREAD)
        for slot in slots_of_partitions("t", partitions, 8, SPREAD)
    }
    assert sorted(i for indices in held.values() for i in indices) == list(range(partitions))
    for slot, indices in held.items():
        assert indices == sorted(indices)
        assert all(slot_of(partition_name("t", i), 8, SPREAD) == slot for i in indices)


def slot_answers(
    name: str, partitions: int, statuses: list[pb.CompactionStatus]
) -> dict[int, pb.CompactionStatus]:
    """What each slot answers: the aggregate of its own partitions (as the slot does)."""
    return {
        slot: aggregate(
            [statuses[i] for i in partitions_in_slot(name, partitions, slot, 8, SPREAD)]
        )
        for slot in reversed(slots_of_partitions(name, partitions, 8, SPREAD))
    }


def status(i: int, state: State.State.ValueType, error: str = "") -> pb.CompactionStatus:
    out = pb.CompactionStatus(state=state, last_error=error)
    out.last_run.read, out.last_run.kept, out.last_run.duration_ms = 100 + i, i, 10 * i
    out.last_run.engine = "python"
    return out


@pytest.mark.parametrize("partitions", [4, 11])
def test_compaction_statuses_fold_in_partition_order_by_the_slots_rule(partitions: int) -> None:
    states = [State.SUCCESS] * partitions
    states[1], states[partitions - 1] = State.ERROR, State.RUNNING
    statuses = [status(i, s, "disk full" if s == State.ERROR else "") for i, s in enumerate(states)]
    merged = merge_compaction(slot_answers("t", partitions, statuses), "t", partitions, 8, SPREAD)
    assert merged == aggregate(statuses)  # what a single store answers
    assert list(merged.partitions) == statuses
    assert merged.state == State.RUNNING
    assert merged.last_error == "partition 1: disk full"
    assert merged.last_run.read == sum(100 + i for i in range(partitions))
    assert merged.last_run.duration_ms == 10 * (partitions - 1)


def test_a_slot_answering_one_partition_plainly_is_taken_as_that_partition() -> None:
    statuses = [status(i, State.SUCCESS) for i in range(2)]
    answers = {
        slot: statuses[partitions_in_slot("t", 2, slot, 8, SPREAD)[0]]
        for slot in slots_of_partitions("t", 2, 8, SPREAD)
    }
    assert merge_compaction(answers, "t", 2, 8, SPREAD) == aggregate(statuses)


def test_a_slot_answering_the_wrong_count_is_an_error() -> None:
    answers = slot_answers("t", 11, [status(i, State.SUCCESS) for i in range(11)])
    slot = next(s for s, a in answers.items() if len(a.partitions) == 2)
    del answers[slot].partitions[1]
    with pytest.raises(CompactlogError, match=f"slot {slot} answered 1"):
        merge_compaction(answers, "t", 11, 8, SPREAD)


def test_the_partition_map_names_every_partition_and_its_address() -> None:
    def address_of(topic: str) -> str:
        return f"127.0.0.1:{7000 + slot_of(topic, 8, SPREAD)}"

    answer = partition_map("t", 3, address_of)
    assert [(p.partition, p.topic, p.address) for p in answer.partitions] == [
        (i, f"t-partition-{i}", address_of(f"t-partition-{i}")) for i in range(3)
    ]
    assert len({p.address for p in answer.partitions}) == 3


def test_errors_name_true_indices_when_a_slot_gave_no_answer() -> None:
    statuses = [status(i, State.ERROR, f"bad {i}") for i in range(4)]
    answers = slot_answers("t", 4, statuses)
    del answers[slots_of_partitions("t", 4, 8, SPREAD)[1]]  # no record of t there
    merged = merge_compaction(answers, "t", 4, 8, SPREAD)
    assert merged.last_error == "partition 0: bad 0; partition 2: bad 2; partition 3: bad 3"


def sub(name: str, backlog: int, type_: int = pb.EXCLUSIVE, mark: int = 0) -> pb.SubscriptionInfo:
    out = pb.SubscriptionInfo(name=name, type=type_, backlog=backlog)  # type: ignore[arg-type]
    if mark:
        out.mark_delete.entry_id = mark
    return out


def test_subscriptions_fold_by_name_with_backlogs_summed() -> None:
    """The slot folds its partitions' lists with it and the front its slots' lists: the
    fold of folds is the fold of every partition."""
    parts = [[sub("s", 1, mark=4), sub("w", 2, pb.SHARED)], [sub("s", 3)], [], [sub("a", 5)]]
    merged = merge_subscriptions(parts)
    assert [(m.name, m.type, m.backlog) for m in merged] == [
        ("a", pb.EXCLUSIVE, 5),
        ("s", pb.EXCLUSIVE, 4),
        ("w", pb.SHARED, 2),
    ]
    assert not any(m.HasField("mark_delete") for m in merged)  # a position of one partition
    by_slot = [merge_subscriptions(parts[:2]), merge_subscriptions(parts[2:])]
    assert merge_subscriptions(by_slot) == merged
    assert merge_subscriptions([[sub("s", 1, pb.FAILOVER)], [sub("s", 1)]])[0].type == pb.FAILOVER
