"""What the front's repair finds wrong with a spread partitioned topic's slots, from their
GetTopic answers (``server/front/spread/repair.py``: ``plan``), and a pass under a living
front finishing an AddPartitions that a slot away cut half-way (stand-in slots)."""

from __future__ import annotations

import grpc
import pytest

from compactlog.server.front.spread.repair import SpreadRepair, config_change, plan
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.server.front.test_spread_admin import Cluster, holders, run

HOME = 3
DEFAULTS = {"retention.ms": "-1", "retention.bytes": "-1"}


def info(partitions: int, **config: str) -> pb.TopicInfo:
    return pb.TopicInfo(
        name="t", kind=pb.SEGMENTED, partitions=partitions, config={**DEFAULTS, **config}
    )


def test_slots_that_agree_need_nothing() -> None:
    mend = plan("t", HOME, {HOME: info(4), 4: info(4), 5: info(4), 6: info(4)})
    assert mend.agreed and mend.total == 4


def test_a_slot_without_the_record_or_with_fewer_partitions_grows_to_the_greatest() -> None:
    mend = plan("t", HOME, {HOME: info(6), 4: info(4), 5: None, 6: info(6)})
    assert not mend.agreed and mend.grow == (4, 5) and mend.configure == {}
    assert mend.home is not None
    assert (mend.home.partitions, mend.home.kind) == (6, pb.SEGMENTED)  # partition 0's kind


def test_a_count_greater_than_the_homes_wins_and_the_home_grows_too() -> None:
    mend = plan("t", HOME, {HOME: info(4), 4: info(6)})
    assert mend.total == 6 and mend.grow == (HOME,)


def test_config_keys_that_differ_from_the_homes_are_set_or_removed() -> None:
    home = info(4, **{"retention.ms": "5", "segment.ms": "9"})
    stale = info(4, **{"max.message.bytes": "10"})
    mend = plan("t", HOME, {HOME: home, 4: stale, 5: home})
    assert mend.grow == () and list(mend.configure) == [4]
    change = mend.configure[4]
    assert dict(change.set) == {"retention.ms": "5", "segment.ms": "9"}
    assert list(change.remove) == ["max.message.bytes"] and change.name == "t"


def test_a_lagging_slot_gets_both_growth_and_the_config() -> None:
    mend = plan("t", HOME, {HOME: info(6, **{"retention.ms": "5"}), 4: info(4)})
    assert mend.grow == (4,) and dict(mend.configure[4].set) == {"retention.ms": "5"}


def test_without_the_homes_record_the_others_parts_are_removed() -> None:
    mend = plan("t", HOME, {HOME: None, 4: info(4), 5: None, 6: info(4)})
    assert mend.home is None and mend.remove == (4, 6) and not mend.agreed


def test_no_slot_holding_the_record_is_nothing_to_mend() -> None:
    mend = plan("t", HOME, {HOME: None, 4: None})
    assert mend.agreed and mend.home is None


def test_config_change_of_equal_configs_is_none() -> None:
    assert config_change("t", DEFAULTS, dict(DEFAULTS)) is None


def test_a_pass_finishes_an_add_partitions_a_slot_away_cut_half_way() -> None:
    """Under a living front: the call fails (UNAVAILABLE), NAME is marked; the pass
    leaves it marked while the slots are away and finishes it when they are back."""

    async def test(cluster: Cluster, admin: pb_grpc.TopicAdminStub) -> None:
        await admin.CreateTopic(pb.CreateTopicRequest(name="t", partitions=2))
        await admin.UpdateTopicConfig(pb.UpdateTopicConfigRequest(name="t", set={"x": "1"}))
        new = holders(cluster, "t", 4)[2:]
        for slot in new:  # gone after the front checked the new partitions' names free
            slot.away = slot.answers_reads = True
        with pytest.raises(grpc.aio.AioRpcError) as away:
            await admin.AddPartitions(pb.AddPartitionsRequest(name="t", partitions=4))
        assert away.value.code() == grpc.StatusCode.UNAVAILABLE
        assert cluster.index.suspects() == ["t"]
        repair = SpreadRepair(cluster.spread)
        assert await repair.run_pass(cluster.index.suspects()) == ["t"]  # still away
        for slot in new:
            slot.away = False
        assert await repair.run_pass(cluster.index.suspects()) == []
        assert all(s.records == {"t": 4} for s in holders(cluster, "t", 4))
        home_config = holders(cluster, "t", 4)[0].info("t").config
        for slot in new:  # created with partition 0's config, by the front's own call
            assert slot.info("t").config == home_config
            assert slot.marked[-1] == ("CreateTopic", True)
        assert cluster.index.suspects() == []
        held = cluster.index.get("t")
        assert held is not None and held.partitions == 4

    run(test)
