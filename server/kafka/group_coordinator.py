"""Kafka's classic consumer group protocol, the coordinator's side: one state machine a
group, in memory, on the server's event loop (no locks: every call runs on the loop).

The clients assign partitions (JoinGroup, then the leader's SyncGroup); a reaper removes
members whose session timed out. The states, as Kafka's ``GroupMetadata``, with every
transition checked against ``TRANSITIONS``: Empty, PreparingRebalance,
CompletingRebalance, Stable. What each state means and what is not kept is in
docs/kafka.md ("Consumer groups", "Inside the listener").
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from dataclasses import dataclass, field

from compactlog.server.kafka.errors import ErrorCode, KafkaError

log = logging.getLogger("compactlog.kafka")

REAP_EVERY_S = 0.5


class State(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


TRANSITIONS: dict[State, frozenset[State]] = {
    State.EMPTY: frozenset({State.PREPARING_REBALANCE}),
    State.PREPARING_REBALANCE: frozenset({State.COMPLETING_REBALANCE, State.EMPTY}),
    State.COMPLETING_REBALANCE: frozenset({State.PREPARING_REBALANCE, State.STABLE}),
    State.STABLE: frozenset({State.PREPARING_REBALANCE}),
}


@dataclass
class Joined:
    """A JoinGroup's answer: ``members`` (id, metadata) for the leader only."""

    generation: int
    protocol_type: str
    protocol: str
    leader: str
    member_id: str
    members: list[tuple[str, bytes]]


@dataclass
class Member:
    member_id: str
    client_id: str
    session_s: float
    rebalance_s: float
    protocols: list[tuple[str, bytes]]
    seen: float  # loop time of its last call: the session timeout counts from here
    assignment: bytes = b""
    joining: asyncio.Future[Joined] | None = None
    syncing: asyncio.Future[bytes] | None = None

    def fail(self, code: ErrorCode) -> None:
        """End its waiting JoinGroup or SyncGroup with ``code``; its session counts again
        from this answer."""
        for future in (self.joining, self.syncing):
            if future is not None and not future.done():
                future.set_exception(KafkaError(code))
                self.seen = future.get_loop().time()
        self.joining = self.syncing = None

    @property
    def waiting(self) -> bool:
        """Its JoinGroup or SyncGroup waits on the group: the answer is late, not the
        member (clients do not heartbeat meanwhile), so its session does not run."""
        return self.joining is not None or self.syncing is not None


@dataclass
class Group:
    group_id: str
    loop: asyncio.AbstractEventLoop
    state: State = State.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    _deadline: asyncio.TimerHandle | None = None
    _reap_due: float | None = None  # loop time the next reaper tick is due at

    def _move(self, to: State) -> None:
        if to not in TRANSITIONS[self.state]:
            raise AssertionError(f"group {self.group_id!r}: {self.state.value} -> {to.value}")
        log.debug("kafka group %r: %s -> %s", self.group_id, self.state.value, to.value)
        self.state = to

    def _member(self, member_id: str) -> Member:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"no member {member_id!r}")
        member.seen = self.loop.time()
        return member

    def _check_generation(self, generation: int) -> None:
        if generation != self.generation:
            raise KafkaError(
                ErrorCode.illegal_generation, f"generation {generation}, not {self.generation}"
            )

    # ---- JoinGroup --------------------------------------------------------------------

    async def join(
        self,
        member_id: str,
        client_id: str,
        timeouts: tuple[float, float],
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> Joined:
        """``timeouts``: session and rebalance timeout, seconds."""
        if member_id and member_id not in self.members:
            raise KafkaError(ErrorCode.unknown_member_id, f"no member {member_id!r}")
        if not protocols or (
            self.members
            and (protocol_type != self.protocol_type or not self._common(protocols, member_id))
        ):
            raise KafkaError(ErrorCode.inconsistent_group_protocol)
        if not self.members:
            self.protocol_type = protocol_type
        member_id = member_id or f"{client_id or 'member'}-{uuid.uuid4()}"
        member = self.members.get(member_id)
        if member is None:
            member = self.members[member_id] = Member(member_id, client_id, 0, 0, [], 0)
        member.fail(ErrorCode.rebalance_in_progress)  # a join repeated: the old one ends
        member.session_s, member.rebalance_s = timeouts
        member.protocols, member.seen = list(protocols), self.loop.time()
        member.joining = self.loop.create_future()
        joining = member.joining
        if self.state != State.PREPARING_REBALANCE:
            self._prepare()
        self._maybe_complete_join()
        self._reap_later()
        return await joining

    def _common(self, protocols: list[tuple[str, bytes]], but: str) -> bool:
        names = {name for name, _ in protocols}
        return all(
            names & {n for n, _ in m.protocols} for m in self.members.values() if m.member_id != but
        )

    def _prepare(self) -> None:
        if self.state == State.COMPLETING_REBALANCE:
            for member in self.members.values():
                if member.syncing is not None:
                    member.fail(ErrorCode.rebalance_in_progress)
        self._move(State.PREPARING_REBALANCE)
        timeout = max((m.rebalance_s for m in self.members.values()), default=0.0)
        self._deadline = self.loop.call_later(timeout, self._join_deadline)

    def _join_deadline(self) -> None:
        """The rebalance timeout: members that did not rejoin are out."""
        self._deadline = None
        if self.state != State.PREPARING_REBALANCE:
            return
        for member in list(self.members.values()):
            if member.joining is None:
                log.info("kafka group %r: %s did not rejoin", self.group_id, member.member_id)
                del self.members[member.member_id]
                member.fail(ErrorCode.unknown_member_id)
        self._complete_join()

    def _maybe_complete_join(self) -> None:
        if self.state == State.PREPARING_REBALANCE and all(
            m.joining is not None for m in self.members.values()
        ):
            self._complete_join()

    def _complete_join(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self.generation += 1
        if not self.members:
            self.protocol = self.leader = ""
            self._move(State.EMPTY)
            return
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.protocol = self._choose()
        self._move(State.COMPLETING_REBALANCE)
        everyone = [(m.member_id, dict(m.protocols)[self.protocol]) for m in self.members.values()]
        now = self.loop.time()
        for member in self.members.values():
            joined = Joined(
                self.generation,
                self.protocol_type,
                self.protocol,
                self.leader,
                member.member_id,
                everyone if member.member_id == self.leader else [],
            )
            assert member.joining is not None
            if not member.joining.done():
                member.joining.set_result(joined)
            member.joining, member.seen = None, now

    def _choose(self) -> str:
        """The first protocol of the leader's list that every member supports."""
        for name, _ in self.members[self.leader].protocols:
            if all(name in dict(m.protocols) for m in self.members.values()):
                return name
        raise AssertionError("members without a common protocol were refused")

    # ---- SyncGroup, Heartbeat, LeaveGroup, session timeouts ----------------------------

    async def sync(self, member_id: str, generation: int, assignments: dict[str, bytes]) -> bytes:
        member = self._member(member_id)
        self._check_generation(generation)
        if self.state == State.PREPARING_REBALANCE:
            raise KafkaError(ErrorCode.rebalance_in_progress)
        if self.state == State.STABLE:
            return member.assignment
        if member_id != self.leader:
            member.syncing = self.loop.create_future()
            return await member.syncing
        for other in self.members.values():
            other.assignment = assignments.get(other.member_id, b"")
        self._move(State.STABLE)
        now = self.loop.time()
        for other in self.members.values():
            if other.syncing is not None and not other.syncing.done():
                other.syncing.set_result(other.assignment)
                other.seen = now
            other.syncing = None
        return member.assignment

    def heartbeat(self, member_id: str, generation: int) -> None:
        self._member(member_id)
        self._check_generation(generation)
        if self.state == State.PREPARING_REBALANCE:
            raise KafkaError(ErrorCode.rebalance_in_progress)

    def leave(self, member_id: str) -> None:
        self._remove(self._member(member_id), "left")

    def _remove(self, member: Member, why: str) -> None:
        log.info("kafka group %r: member %s %s", self.group_id, member.member_id, why)
        del self.members[member.member_id]
        member.fail(ErrorCode.unknown_member_id)
        if self.state in (State.STABLE, State.COMPLETING_REBALANCE):
            self._prepare()
        self._maybe_complete_join()

    def expire(self) -> None:
        """Remove members whose session timed out; as Kafka, not those waiting for the
        answer to their JoinGroup or SyncGroup (a follower waits for the leader's sync)."""
        now = self.loop.time()
        for member in list(self.members.values()):
            if not member.waiting and now - member.seen > member.session_s:
                self._remove(member, f"timed out ({member.session_s:g} s without a heartbeat)")

    def _reap_later(self) -> None:
        if self._reap_due is None:
            self._reap_due = self.loop.time() + REAP_EVERY_S
            self.loop.call_later(REAP_EVERY_S, self._reap)

    def _reap(self) -> None:
        """A tick of the reaper. One that runs a tick late found the server itself
        stalled (stopped, starved of CPU, blocked): the heartbeats that came meanwhile
        wait unread in the sockets, and this tick runs before they are read, so it
        expires no one; the next tick, once they are read, does."""
        assert self._reap_due is not None
        late = self.loop.time() - self._reap_due
        self._reap_due = None
        if not self.members:
            return
        if late < REAP_EVERY_S:
            self.expire()
        else:
            log.info("kafka group %r: the server stalled %.1f s; expiry waits", self.group_id, late)
        self._reap_later()

    def check_commit(self, member_id: str, generation: int) -> None:
        """May this OffsetCommit move the group's offsets? As Kafka: a commit without a
        generation (an ``assign()`` consumer) only while the group has no members;
        otherwise from a member of the current generation that has its assignment."""
        if generation < 0 and not self.members:
            return
        self._member(member_id)
        self._check_generation(generation)
        if self.state == State.COMPLETING_REBALANCE:
            raise KafkaError(ErrorCode.rebalance_in_progress)

    def stop(self) -> None:
        """The listener stops: waiting joins and syncs end with NOT_COORDINATOR."""
        if self._deadline is not None:
            self._deadline.cancel()
        for member in self.members.values():
            member.fail(ErrorCode.not_coordinator)


class Coordinator:
    """Every group of this server (the coordinator of all of them)."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}

    def get(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, asyncio.get_running_loop())
        return group

    def stop(self) -> None:
        for group in self.groups.values():
            group.stop()
