"""``serve --kafka-listen --shards 3`` on partition placement, one topic's partitions on
several brokers (docs/kafka.md, "Partition placement"): while the shard holding a topic's
own slot restarts, Metadata shows only that broker's partitions leaderless, also from a
broker holding none of the topic's partitions, and the live brokers' partitions go on
taking produces and fetches; a topic change that a down slot blocks answers
REQUEST_TIMED_OUT; a ``validate_only`` CreateTopics or CreatePartitions answers what the
change itself answers, whichever slot refuses it (a shard down, a name taken, a config
refused), and makes nothing. Real clients (confluent-kafka), real faults (kill -9 of a
shard, its restart held by SIGSTOP)."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from compactlog.partitioner import partition_name
from compactlog.storage.slots import SLOT_COUNT, Placement, shard_of, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.e2e.shards import shard_pids, wait_for
from tests.kafka.conftest import KAFKA_ARGS, Grpc
from tests.kafka.test_groups_confluent import poll_until
from tests.kafka.test_shards import _cmdline, _dead, _restarts, metadata
from tests.kafka.test_wire import connect, decode, frame, receive

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic  # noqa: E402
from kio.schema.metadata.v12.response import MetadataResponse  # noqa: E402

SHARDS = 3  # more than two: a broker may hold none of a topic's partitions
DOWN = 1  # the shard killed; broker 0, the bootstrap, answers throughout
COUNT = 4  # four consecutive slots: partitions on every broker


def owner(topic: str, partition: int) -> int:
    """The broker that must lead partition ``partition`` of ``topic``: its slot's shard."""
    slot = slot_of(partition_name(topic, partition), SLOT_COUNT, Placement.PARTITION)
    return shard_of(slot, SHARDS)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def named(prefix: str, fits: Callable[[str], bool]) -> str:
    """A fresh name that ``fits``."""
    return next(n for n in iter(lambda: fresh(prefix), "") if fits(n))


def homed(prefix: str, node: int) -> str:
    """A fresh name whose own slot (partition 0's) broker ``node`` serves."""
    return named(prefix, lambda n: owner(n, 0) == node)


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base: Path = tmp_path_factory.mktemp("kafka-placement-down")
    config = base / "config.toml"
    config.write_text('"shards.placement" = "partition"\n')
    srv = ServerProcess(base / "data", config, ["--shards", str(SHARDS), *KAFKA_ARGS]).start()
    yield srv
    assert srv.stop() == 0


@pytest.fixture(scope="module")
def side(spread: ServerProcess) -> Iterator[Grpc]:
    front = Grpc(spread.address)
    yield front
    front.channel.close()


@contextlib.contextmanager
def restarting(srv: ServerProcess) -> Iterator[None]:
    """Shard ``DOWN`` killed (kill -9) and its restart held before it serves: the front
    stopped while it dies, then running on while the new shard process is stopped
    (SIGSTOP) from its first moments, so neither its gRPC slots nor its broker serve."""
    assert srv.proc is not None
    victim = next(p for p in shard_pids(srv) if f" --shard {DOWN} " in _cmdline(p))
    restarts = _restarts(srv)
    os.kill(srv.proc.pid, signal.SIGSTOP)
    try:
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: _dead(victim), 30)
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
    held: list[int] = []

    def respawned() -> bool:
        held.extend(
            p for p in shard_pids(srv) if p != victim and f" --shard {DOWN} " in _cmdline(p)
        )
        return bool(held)

    wait_for(respawned, 30)
    os.kill(held[0], signal.SIGSTOP)
    try:
        assert _restarts(srv) == restarts, "the new shard served before it was stopped"
        yield
    finally:
        os.kill(held[0], signal.SIGCONT)
        wait_for(lambda: _restarts(srv) > restarts, 60)


def leaders(address: str, name: str) -> list[tuple[int, int]]:
    """Each partition's (leader, error code) in librdkafka's Metadata of ``name``."""
    topic = AdminClient({"bootstrap.servers": address}).list_topics(name, timeout=30).topics[name]
    assert topic.error is None, topic.error
    return [
        (p.leader, p.error.code() if p.error is not None else 0)
        for _i, p in sorted(topic.partitions.items())
    ]


def answered_by(address: str, name: str) -> list[tuple[int, int]]:
    """As ``leaders``, from the broker at ``address`` itself (librdkafka asks any broker
    it knows, so a test of one broker's answer asks that broker)."""
    topics = (MetadataRequestTopic(topic_id=None, name=name),)
    request = MetadataRequest(
        topics=topics, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    with connect(address) as sock:
        sock.sendall(frame(request, 3))
        (topic,) = decode(MetadataResponse, receive(sock), 3).topics
    assert topic.error_code == ErrorCode.none, topic.error_code
    return [(p.leader_id, p.error_code) for p in topic.partitions]


def expected(name: str, down: set[int], count: int = COUNT) -> list[tuple[int, int]]:
    """Each partition led by its owner, or leaderless while the owner is in ``down``."""
    no_leader = (-1, ErrorCode.leader_not_available)
    return [no_leader if owner(name, i) in down else (owner(name, i), 0) for i in range(count)]


def outcome(future: Any) -> ErrorCode:
    """The Kafka error code a client's future ended with (``none``: it succeeded)."""
    return answered(future)[0]


def answered(future: Any) -> tuple[ErrorCode, str]:
    """The Kafka error code and message a client's future ended with."""
    try:
        future.result(30)
    except KafkaException as exc:
        return ErrorCode(exc.args[0].code()), exc.args[0].str()
    return ErrorCode.none, ""


Change = Callable[[bool], Any]


def refused_alike(change: Change) -> ErrorCode:
    """The code ``change`` is refused with, validated and made: the same code and
    message both times."""
    checked, made = answered(change(True)), answered(change(False))
    assert checked == made
    return made[0]


def creating(admin: AdminClient, name: str, **config: str) -> Change:
    def create(validate_only: bool) -> Any:
        new = NewTopic(name, COUNT, 1, config=config or {"cleanup.policy": "compact"})
        return admin.create_topics([new], validate_only=validate_only)[name]

    return create


def growing(admin: AdminClient, name: str, total: int) -> Change:
    def grow(validate_only: bool) -> Any:
        asked = [NewPartitions(name, total)]
        return admin.create_partitions(asked, validate_only=validate_only)[name]

    return grow


def partitions(side: Grpc, name: str) -> int:
    """``name``'s partition count over gRPC; 0 when it does not exist."""
    try:
        return side.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30).partitions
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.NOT_FOUND, exc
        return 0


def produce_to(address: str, name: str, parts: list[int], tag: bytes) -> None:
    producer = ck.Producer({"bootstrap.servers": address, "acks": -1})
    for p in parts:
        producer.produce(name, value=tag + b"%d" % p, partition=p)
    assert producer.flush(30) == 0


def read(address: str, name: str, parts: list[int], count: int) -> list[tuple[int, bytes]]:
    group = homed("g", 0)  # coordinated by the live broker: no wait on the other
    c = ck.Consumer({"bootstrap.servers": address, "group.id": group})
    c.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in parts])
    seen: list[Any] = []
    try:
        poll_until(c, lambda: len(seen) >= count, seen)
    finally:
        c.close()
    return sorted((m.partition(), m.value()) for m in seen)


def test_a_restarting_home_shard_takes_only_its_partitions_away(
    spread: ServerProcess, side: Grpc
) -> None:
    """``away`` and ``far`` (their own slots on the killed shard) are made over gRPC, so
    broker 0 has never shown them: ``away``'s count comes from the record broker 0's
    slots keep, ``far``'s (no partition on broker 0) from broker 2's, also in a Metadata
    of every topic. ``near``'s own
    broker lives, its partitions on the killed shard do not. A create and a grow a killed
    slot blocks answer REQUEST_TIMED_OUT, validated and made."""
    address, admin = spread.kafka_address, AdminClient({"bootstrap.servers": spread.kafka_address})
    away = homed("away", DOWN)
    born = named("born", lambda n: owner(n, 0) == 0 and DOWN in {owner(n, i) for i in range(4)})
    far = named("far", lambda n: [owner(n, 0), owner(n, 1)] == [DOWN, 2])
    near = named("near", lambda n: owner(n, 0) == 0 and DOWN in {owner(n, 4), owner(n, 5)})
    side.create(away, partitions=COUNT)
    side.create(far, partitions=2)
    assert outcome(admin.create_topics([NewTopic(near, COUNT, 1)])[near]) == ErrorCode.none
    live = {away: [i for i in range(COUNT) if owner(away, i) != DOWN], far: [1]}
    assert 0 < len(live[away]) < COUNT
    produce_to(address, away, live[away], b"before-")  # far: no Kafka client has seen it
    tags = {away: (b"before-", b"during-"), far: (b"during-",)}

    with restarting(spread):
        for name, count in ((far, 2), (away, COUNT), (near, COUNT)):
            assert answered_by(address, name) == expected(name, {DOWN}, count), name
            assert leaders(address, name) == expected(name, {DOWN}, count), name
        every = {t.name: t for t in metadata(address).topics}  # every topic: listed too
        for name, count in ((far, 2), (away, COUNT), (near, COUNT)):
            shown = [(p.leader_id, p.error_code) for p in every[name].partitions]
            assert shown == expected(name, {DOWN}, count), name
        for name, parts in live.items():
            produce_to(address, name, parts, b"during-")
            assert read(address, name, parts, len(tags[name]) * len(parts)) == sorted(
                (p, tag + b"%d" % p) for p in parts for tag in tags[name]
            )
        # a slot the change touches is away, the topic's own or another: one code,
        # REQUEST_TIMED_OUT (docs/kafka.md), refused alike, made nowhere
        gone = homed("gone", DOWN)
        changes = [creating(admin, born), creating(admin, gone)]
        changes += [growing(admin, near, COUNT + 2), growing(admin, away, COUNT + 2)]
        assert [refused_alike(c) for c in changes] == [ErrorCode.request_timed_out] * 4
        assert partitions(side, born) == 0

    assert partitions(side, near) == COUNT
    wait_for(lambda: leaders(address, away) == expected(away, set()), 60)
    assert leaders(address, near) == expected(near, set())
    assert leaders(address, far) == expected(far, set(), 2)


def test_validate_only_answers_what_the_change_would(spread: ServerProcess, side: Grpc) -> None:
    """Each refusal comes from a slot other than the topic's own (a partition's name
    taken there), or from every slot (a bad config); validated or made, the same code and
    message, and a validation makes nothing."""
    admin = AdminClient({"bootstrap.servers": spread.kafka_address})
    clash, grown, fine = fresh("clash"), fresh("grown"), fresh("fine")
    side.create(f"{clash}-partition-{COUNT - 1}")  # a topic of its own, in a far slot
    side.create(f"{grown}-partition-{COUNT + 1}")
    assert refused_alike(creating(admin, clash)) == ErrorCode.topic_already_exists
    assert partitions(side, clash) == 0
    bad = creating(admin, fine, **{"cleanup.policy": "shred"})
    assert refused_alike(bad) == ErrorCode.invalid_config
    assert outcome(creating(admin, grown)(False)) == ErrorCode.none
    assert refused_alike(growing(admin, grown, COUNT + 2)) == ErrorCode.topic_already_exists
    assert partitions(side, grown) == COUNT

    assert outcome(creating(admin, fine)(True)) == ErrorCode.none
    assert partitions(side, fine) == 0
    assert outcome(growing(admin, grown, COUNT + 1)(True)) == ErrorCode.none
    assert partitions(side, grown) == COUNT
