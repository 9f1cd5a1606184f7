"""``serve --kafka-listen --shards 2`` with one broker down: a request that spans both
brokers answers the live broker's parts as usual and the down broker's parts with a
per-part error, at once (docs/kafka.md, "With --shards N"); back up, all parts answer.

Broker 1 is killed (kill -9) with its front stopped, so it is not restarted behind the
test's back; every request goes to broker 0, the bootstrap, with real clients
(confluent-kafka's AdminClient and Consumer) and on the wire for OffsetFetch's codes."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ServerProcess
from tests.e2e.shards import shard_pids, wait_for
from tests.kafka.test_groups_confluent import create, poll_until, produce
from tests.kafka.test_shards import (
    _cmdline,
    _dead,
    _restarts,
    leader,
    metadata,
    names_on_every_broker,
    sharded,
)
from tests.kafka.test_wire import connect, decode, frame, receive

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.offset_fetch.v7.request import (  # noqa: E402
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
)
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse  # noqa: E402

__all__ = ["sharded"]  # the module's one sharded server

DOWN = 1  # the broker killed; broker 0 (the bootstrap) answers for both
NOT_SERVING = "which stores it, cannot be reached: not serving (down or restarting)"


def _code(future: Any) -> ErrorCode:
    """The Kafka error code a client's future failed with (``none``: it succeeded)."""
    return _failure(future)[0]


def _failure(future: Any) -> tuple[ErrorCode, str]:
    """The Kafka error code and message a client's future failed with."""
    try:
        future.result(30)
    except KafkaException as exc:
        return ErrorCode(exc.args[0].code()), exc.args[0].str()
    return ErrorCode.none, ""


def _topic(name: str) -> ConfigResource:
    return ConfigResource(ConfigResource.Type.TOPIC, name)


def _offset_fetch(address: str, group: str, names: list[str]) -> dict[str, tuple[int, int]]:
    """Partition 0's (committed offset, error code) by topic, OffsetFetch v7 on the wire."""
    topics = tuple(OffsetFetchRequestTopic(name=n, partition_indexes=(0,)) for n in names)
    request = OffsetFetchRequest(group_id=group, topics=topics, require_stable=False)
    with connect(address) as sock:
        sock.sendall(frame(request, 9))
        answer = decode(OffsetFetchResponse, receive(sock), 9)
    assert answer.error_code == ErrorCode.none
    return {
        t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code)
        for t in answer.topics
    }


@contextlib.contextmanager
def broker_down(srv: ServerProcess) -> Iterator[None]:
    """Broker ``DOWN`` killed, held down (its front stopped) inside, restarted after."""
    assert srv.proc is not None
    victim = next(p for p in shard_pids(srv) if f" --shard {DOWN} " in _cmdline(p))
    restarts = _restarts(srv)
    os.kill(srv.proc.pid, signal.SIGSTOP)
    try:
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: _dead(victim), 30)
        yield
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
        wait_for(lambda: _restarts(srv) > restarts, 60)


class Split:
    """Topics and a group spread so that each request names parts of both brokers, all
    asked at broker 0 (the bootstrap, the controller and the group's coordinator)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.up, self.down = names_on_every_broker("split", 1)  # led by broker 0, by 1
        self.new_up, self.new_down = names_on_every_broker("born", 1)
        groups = (f"g{uuid.uuid4().hex[:8]}" for _ in range(99))
        self.group = next(g for g in groups if leader(g) == 0)
        self.admin = AdminClient({"bootstrap.servers": address})

    def commit(self, offset: int) -> ErrorCode:
        """Commit ``offset`` on both topics' partition 0 (librdkafka fails the whole
        commit with the first partition's code when one fails)."""
        c = ck.Consumer({"bootstrap.servers": self.address, "group.id": self.group})
        wanted = [TopicPartition(n, 0, offset) for n in (self.up, self.down)]
        try:
            done = c.commit(offsets=wanted, asynchronous=False)
        except KafkaException as exc:
            return ErrorCode(exc.args[0].code())
        finally:
            c.close()
        assert [tp.error for tp in done] == [None, None]
        return ErrorCode.none

    def committed(self) -> dict[str, tuple[int, int]]:
        return _offset_fetch(self.address, self.group, [self.up, self.down])

    def create(self, *names: str) -> list[ErrorCode]:
        made = self.admin.create_topics([NewTopic(n, 1) for n in names])
        return [_code(made[n]) for n in names]

    def refused(self) -> tuple[ErrorCode, str]:
        """How describing the down broker's topic failed."""
        return _failure(self.admin.describe_configs([_topic(self.down)])[_topic(self.down)])

    def describe(self) -> list[Any]:
        """Each topic's cleanup.policy, or the error code its description failed with."""
        found = self.admin.describe_configs([_topic(self.up), _topic(self.down)])
        answers: list[Any] = []
        for resource in (_topic(self.up), _topic(self.down)):
            code = _code(found[resource])
            described = found[resource].result(0) if code == ErrorCode.none else None
            answers.append(code if described is None else described["cleanup.policy"].value)
        return answers

    def alter(self) -> list[ErrorCode]:
        entry = ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)
        resources = [
            ConfigResource("topic", n, incremental_configs=[entry]) for n in (self.up, self.down)
        ]
        altered = self.admin.incremental_alter_configs(resources)
        return [_code(altered[r]) for r in resources]

    def grow(self) -> list[ErrorCode]:
        grown = self.admin.create_partitions([NewPartitions(n, 3) for n in (self.up, self.down)])
        return [_code(grown[n]) for n in (self.up, self.down)]

    def delete(self, *names: str) -> list[ErrorCode]:
        deleted = self.admin.delete_topics(list(names))
        return [_code(deleted[n]) for n in names]

    def read_up(self, count: int) -> list[Any]:
        """The records a consumer assigned every partition of both topics reads, the
        down broker's partitions included: ``count`` of them, all the live broker's."""
        config = {"bootstrap.servers": self.address, "group.id": self.group}
        c = ck.Consumer({**config, "enable.auto.commit": False})  # the commits stay
        c.assign(
            [TopicPartition(n, p, OFFSET_BEGINNING) for n in (self.up, self.down) for p in (0, 1)]
        )
        seen: list[Any] = []
        try:
            poll_until(c, lambda: len(seen) >= count, seen)
        finally:
            c.close()
        return [(m.topic(), m.value()) for m in seen]

    def partitions(self, name: str) -> int:
        return len(next(t for t in metadata(self.address).topics if t.name == name).partitions)


def test_a_down_broker_fails_only_its_parts_and_at_once(sharded: ServerProcess) -> None:
    split = Split(sharded.kafka_address)
    for name in (split.up, split.down):
        create(split.address, name, 2)
    records = [(b"k%d" % i, b"v%d" % i) for i in range(6)]
    for name in (split.up, split.down):
        produce(split.address, name, records)
    assert split.commit(3) == ErrorCode.none  # broker 0 now keeps a connection to 1
    timed_out = ErrorCode.request_timed_out

    with broker_down(sharded):
        # known down at once (its beacon gone), not after ASK_TIMEOUT_S: the knock's reason
        assert split.refused() == (timed_out, f"Kafka broker {DOWN}, {NOT_SERVING}")
        assert split.create(split.new_up, split.new_down) == [ErrorCode.none, timed_out]
        assert split.describe() == ["compact", timed_out]
        assert split.alter() == [ErrorCode.none, timed_out]
        assert split.grow() == [ErrorCode.none, timed_out]
        assert split.delete(split.new_up, split.down) == [ErrorCode.none, timed_out]
        assert split.commit(5) == ErrorCode.coordinator_not_available
        assert split.committed() == {
            split.up: (5, ErrorCode.none),  # the live broker's part was committed
            split.down: (-1, ErrorCode.unstable_offset_commit),
        }
        # Fetch goes to each partition's leader: the live one's records keep coming
        assert sorted(split.read_up(6)) == sorted((split.up, v) for _k, v in records)
    assert split.partitions(split.up) == 3

    wait_for(lambda: split.describe() == ["compact", "compact"], 60)  # broker 1 serves again
    assert split.committed() == {split.up: (5, ErrorCode.none), split.down: (3, ErrorCode.none)}
    assert split.commit(7) == ErrorCode.none
    assert split.committed() == {split.up: (7, ErrorCode.none), split.down: (7, ErrorCode.none)}
    assert split.create(split.new_down) == [ErrorCode.none]
    assert split.grow() == [ErrorCode.invalid_partitions, ErrorCode.none]
    assert split.partitions(split.down) == 3
