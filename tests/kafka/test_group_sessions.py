"""Session timeouts of the classic group coordinator, on its real state machine and a
real event loop with short sessions: a follower waiting for the leader's SyncGroup keeps
its place however long the leader takes (as Kafka), while a member that goes silent is
dropped, hears UNKNOWN_MEMBER_ID, and joins again as a new member."""

from __future__ import annotations

import asyncio

import pytest

from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.server.kafka.group_coordinator import REAP_EVERY_S, Group, Joined, State

SESSION_S = 0.3
TIMEOUTS = (SESSION_S, 5.0)  # session, rebalance
PROTOCOLS = [("range", b"")]


async def join(group: Group, member_id: str = "") -> Joined:
    return await group.join(member_id, "c", TIMEOUTS, "consumer", PROTOCOLS)


async def heartbeat_for(group: Group, member_id: str, seconds: float) -> None:
    """A member whose heartbeat thread runs while its main thread is busy."""
    for _ in range(round(seconds / 0.05)):
        group.heartbeat(member_id, group.generation)
        await asyncio.sleep(0.05)


async def two_members(group: Group) -> tuple[Joined, Joined]:
    """Leader ``a`` stable in generation 1, then ``b`` joins and ``a`` rejoins."""
    a = await join(group)
    await group.sync(a.member_id, a.generation, {a.member_id: b"A"})
    b_joining = asyncio.ensure_future(join(group))
    await asyncio.sleep(0)
    a = await join(group, a.member_id)
    return a, await b_joining


async def slow_leader() -> tuple[bytes, State]:
    group = Group("g", asyncio.get_running_loop())
    a, b = await two_members(group)
    assert a.leader == a.member_id != b.member_id
    b_sync = asyncio.ensure_future(group.sync(b.member_id, b.generation, {}))
    await heartbeat_for(group, a.member_id, SESSION_S + 3 * REAP_EVERY_S)
    await group.sync(a.member_id, a.generation, {a.member_id: b"A", b.member_id: b"B"})
    assigned = await b_sync
    group.stop()
    return assigned, group.state


def test_a_follower_waiting_for_the_leaders_sync_keeps_its_place() -> None:
    assigned, state = asyncio.run(slow_leader())
    assert (assigned, state) == (b"B", State.STABLE)


async def silent_member() -> tuple[ErrorCode, Joined, Joined]:
    group = Group("g", asyncio.get_running_loop())
    first = await join(group)
    await group.sync(first.member_id, first.generation, {first.member_id: b"A"})
    deadline = group.loop.time() + 30  # no heartbeat: the session ends at a reaper tick
    while first.member_id in group.members:
        assert group.loop.time() < deadline, "the silent member was never dropped"
        await asyncio.sleep(REAP_EVERY_S / 5)
    with pytest.raises(KafkaError) as refused:
        group.heartbeat(first.member_id, first.generation)
    again = await join(group)  # as clients do after UNKNOWN_MEMBER_ID: no member id
    await group.sync(again.member_id, again.generation, {again.member_id: b"A"})
    group.stop()
    return refused.value.code, first, again


def test_a_silent_member_is_dropped_and_joins_again_as_a_new_one() -> None:
    code, first, again = asyncio.run(silent_member())
    assert code == ErrorCode.unknown_member_id
    assert again.member_id != first.member_id and again.generation > first.generation
