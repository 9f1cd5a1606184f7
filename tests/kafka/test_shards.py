"""``serve --kafka-listen --shards 2``: each shard a Kafka broker leading the partitions
its store slots hold (docs/kafka.md, "With --shards N"), with real clients.

One sharded server for the module; topics are named so that both brokers lead some."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog.channels import ChannelSecurity, open_channel
from compactlog.storage.slots import SLOT_COUNT, shard_of, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess, TlsFiles, write_tokens_file
from tests.e2e.shards import shard_pids, wait_for
from tests.kafka.conftest import KAFKA_ARGS, Grpc
from tests.kafka.test_groups_confluent import consumer, create, poll_until, subscription
from tests.kafka.test_kill_during_produce import Producing
from tests.kafka.test_security import consume_group, produce
from tests.kafka.test_wire import connect, decode, fetch_request, frame, receive

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.fetch.v12.response import FetchResponse  # noqa: E402
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest  # noqa: E402
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse  # noqa: E402
from kio.schema.heartbeat.v4.request import HeartbeatRequest  # noqa: E402
from kio.schema.heartbeat.v4.response import HeartbeatResponse  # noqa: E402
from kio.schema.metadata.v12.request import MetadataRequest  # noqa: E402
from kio.schema.metadata.v12.response import MetadataResponse  # noqa: E402

SHARDS = 2
SHARD_ARGS = ("--shards", str(SHARDS), *KAFKA_ARGS)
TOKEN = "shards-admin-7e3a"


def leader(name: str) -> int:
    """The broker that must lead ``name``: its store slot's shard."""
    return shard_of(slot_of(name, SLOT_COUNT), SHARDS)


def names_on_every_broker(prefix: str, each: int = 2) -> list[str]:
    """Fresh names, ``each`` led by every broker."""
    found: dict[int, list[str]] = {node: [] for node in range(SHARDS)}
    while any(len(names) < each for names in found.values()):
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        if len(found[leader(name)]) < each:
            found[leader(name)].append(name)
    return [name for names in found.values() for name in names]


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("kafka-shards") / "data"
    srv = ServerProcess(data, extra_args=SHARD_ARGS).start()
    yield srv
    idle = connect(srv.kafka_address)  # a client's connection still open at the stop
    assert srv.stop() == 0
    idle.close()
    assert not [line for line in srv.stderr_lines if "Exception in callback" in line]


@pytest.fixture(scope="module")
def side(sharded: ServerProcess) -> Iterator[Grpc]:
    grpc_side = Grpc(sharded.address)
    yield grpc_side
    grpc_side.channel.close()


def metadata(address: str) -> Any:
    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    with connect(address) as sock:
        sock.sendall(frame(request, 3))
        return decode(MetadataResponse, receive(sock), 3)


def test_every_broker_gives_the_whole_map(sharded: ServerProcess) -> None:
    names = names_on_every_broker("map")
    for name in names:
        create(sharded.kafka_address, name, 3)
    first = metadata(sharded.kafka_address)
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in first.brokers}
    assert sorted(brokers) == [0, 1] and brokers[0] == sharded.kafka_address
    for address in brokers.values():  # the bootstrap and the other broker alike
        answer = metadata(address)
        topics = {t.name: t for t in answer.topics}
        assert {b.node_id for b in answer.brokers} == {0, 1}
        for name in names:
            leaders = [p.leader_id for p in topics[name].partitions]
            assert leaders == [leader(name)] * 3, name


def test_a_fetch_at_the_wrong_broker_answers_not_leader(sharded: ServerProcess, side: Grpc) -> None:
    name = names_on_every_broker("lead", 1)[1]  # led by broker 1, asked at broker 0
    side.create(name)
    with connect(sharded.kafka_address) as sock:
        sock.sendall(frame(fetch_request(name, 0), 7))
        answer = decode(FetchResponse, receive(sock), 7)
    assert answer.responses[0].partitions[0].error_code == ErrorCode.not_leader_or_follower


def test_groups_have_one_coordinator_and_others_refuse(sharded: ServerProcess) -> None:
    group = "grp-" + uuid.uuid4().hex[:8]
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in metadata(sharded.kafka_address).brokers}
    for address in brokers.values():
        with connect(address) as sock:
            sock.sendall(frame(FindCoordinatorRequest(key=group, key_type=0), 4))
            found = decode(FindCoordinatorResponse, receive(sock), 4)
        assert (found.error_code, found.node_id) == (ErrorCode.none, leader(group))
    other = brokers[1 - leader(group)]
    beat = HeartbeatRequest(group_id=group, generation_id=1, member_id="m", group_instance_id=None)
    with connect(other) as sock:
        sock.sendall(frame(beat, 5))
        assert decode(HeartbeatResponse, receive(sock), 5).error_code == ErrorCode.not_coordinator


def test_keyed_records_across_shards_consume_in_a_group_and_read_over_grpc(
    sharded: ServerProcess, side: Grpc
) -> None:
    address = sharded.kafka_address
    topics = names_on_every_broker("keyed")
    for name in topics:
        create(address, name, 3)
    producer = ck.Producer(
        {"bootstrap.servers": address, "acks": -1, "partitioner": "murmur2_random"}
    )
    for i in range(400):
        value = None if i % 10 == 9 else b"v%d" % i  # tombstones too
        producer.produce(topics[i % len(topics)], key=b"k%d" % (i % 37), value=value)
    assert producer.flush(30) == 0

    group = "g-" + uuid.uuid4().hex[:8]
    c = consumer(address, group)
    c.subscribe(topics)
    seen: list[Any] = []
    poll_until(c, lambda: len(seen) >= 400, seen, limit_s=60)
    c.commit(asynchronous=False)
    c.close()

    by_grpc = {}
    for name in topics:
        for m in side.read(name):
            by_grpc[(name, m.id.partition, m.id.entry_id)] = (m.key, m.value)
    by_kafka = {(m.topic(), m.partition(), m.offset()): (m.key(), m.value() or b"") for m in seen}
    assert by_kafka == by_grpc and len(by_kafka) == 400
    for name in topics:  # the commits, in every partition's store, whoever coordinates
        for p in range(3):
            read = sum(1 for t, part, _o in by_kafka if (t, part) == (name, p))
            if read:
                assert subscription(side, f"{name}-partition-{p}", group).backlog == 0


def test_admin_creates_and_describes_on_every_broker(sharded: ServerProcess, side: Grpc) -> None:
    admin = AdminClient({"bootstrap.servers": sharded.kafka_address})
    names = names_on_every_broker("adm", 1)
    for name in names:
        create(sharded.kafka_address, name, 2)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in names]
    for future in admin.describe_configs(resources).values():
        assert future.result(30)["cleanup.policy"].value == "compact"
    for node in range(SHARDS):  # each asked at its own broker, one a call
        broker = ConfigResource(ConfigResource.Type.BROKER, str(node))
        assert admin.describe_configs([broker])[broker].result(30)
    for name in names:
        info = side.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30)
        assert (info.kind, info.partitions) == (pb.SEGMENTED, 2)


def _secure(srv: ServerProcess, tls: TlsFiles) -> dict[str, Any]:
    """librdkafka's SASL_SSL settings for the admin principal."""
    return {
        "bootstrap.servers": srv.kafka_address,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(tls.ca),
        "sasl.mechanism": "PLAIN",
        "sasl.username": "ops",
        "sasl.password": TOKEN,
    }


def test_a_down_broker_s_topics_stay_listed_without_a_leader(sharded: ServerProcess) -> None:
    """Broker 0 killed and held down (its front stopped, so not yet restarted): broker 1's
    Metadata for every topic still lists broker 0's topics, each partition
    LEADER_NOT_AVAILABLE with leader -1, as Kafka does, so clients retry."""
    down, up = names_on_every_broker("down", 1)  # led by broker 0 and by 1
    for name in (down, up):
        create(sharded.kafka_address, name, 2)
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in metadata(sharded.kafka_address).brokers}
    metadata(brokers[1])  # broker 1 sees broker 0's topics (and connects to it)
    assert sharded.proc is not None
    victim = next(p for p in shard_pids(sharded) if " --shard 0 " in _cmdline(p))
    restarts = _restarts(sharded)
    os.kill(sharded.proc.pid, signal.SIGSTOP)
    try:
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: _dead(victim), 30)
        topics = {t.name: t for t in metadata(brokers[1]).topics}
    finally:
        os.kill(sharded.proc.pid, signal.SIGCONT)
        wait_for(lambda: _restarts(sharded) > restarts, 60)  # later tests need broker 0
    assert topics[up].error_code == ErrorCode.none
    assert [p.leader_id for p in topics[up].partitions] == [1, 1]
    assert topics[down].error_code == ErrorCode.none
    assert [(p.error_code, p.leader_id) for p in topics[down].partitions] == [
        (ErrorCode.leader_not_available, -1)
    ] * 2
    wait_for(lambda: _leaders(brokers[1], down) == [0, 0], 60)  # back with its leader


def _restarts(srv: ServerProcess) -> int:
    return sum("restarted as pid" in line for line in srv.stderr_lines)


def _dead(pid: int) -> bool:
    """Whether process ``pid`` is gone or a zombie whose every thread has exited: a
    killed process's leader shows Z while its other threads still hold its files (its
    sockets, its beacon) open."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            zombie = handle.read().rsplit(")", 1)[1].split()[0] == "Z"
        return zombie and os.listdir(f"/proc/{pid}/task") == [str(pid)]
    except OSError:
        return True


def _leaders(address: str, name: str) -> list[int]:
    topics = {t.name: t for t in metadata(address).topics}
    return [p.leader_id for p in topics[name].partitions]


@pytest.mark.slow
def test_over_sasl_ssl_a_killed_shard_loses_no_acknowledged_record(
    tmp_path: Path, tls_files: TlsFiles
) -> None:
    tokens = write_tokens_file(tmp_path / "tokens.toml", {"ops": (TOKEN, "admin")})
    args = [*SHARD_ARGS, "--auth-tokens", str(tokens)]
    args += ["--tls-cert", str(tls_files.cert), "--tls-key", str(tls_files.key)]
    srv = ServerProcess(tmp_path / "data", extra_args=args).start()
    config = _secure(srv, tls_files)
    channel = open_channel(srv.address, ChannelSecurity.of(TOKEN, tls_files.ca))
    admin, grpc_log = pb_grpc.TopicAdminStub(channel), pb_grpc.LogStub(channel)
    try:
        # Brokers send each other their shares over TLS, marked, not logged in: the
        # topic led by broker 1 is created, and its commit stored, through broker 0.
        name, other = names_on_every_broker("kill", 1)  # led by broker 0 and by 1
        group = next(g for g in (f"g{i}" for i in range(99)) if leader(g) == 0)
        kafka_admin = AdminClient(config)  # kept: its futures need the handle alive
        for future in kafka_admin.create_topics([NewTopic(other, 1)]).values():
            future.result(30)
        assert produce(config, other, [(b"k", b"v%d" % i) for i in range(10)]) == [None] * 10
        assert len(consume_group(config, other, group, 10)) == 10
        listing = admin.ListSubscriptions(pb.ListSubscriptionsRequest(topic=other), timeout=30)
        assert [(s.name, s.backlog) for s in listing.subscriptions] == [(group, 0)]

        admin.CreateTopic(pb.CreateTopicRequest(name=name, kind=pb.SEGMENTED), timeout=30)
        producing = Producing(srv.kafka_address, name, **config)
        producing.start()
        deadline = time.monotonic() + 60
        while len(producing.acked) < 3000:
            assert time.monotonic() < deadline, f"only {len(producing.acked)} acknowledged"
            time.sleep(0.05)
        victim = next(p for p in shard_pids(srv) if " --shard 0 " in _cmdline(p))
        os.kill(victim, signal.SIGKILL)
        killed_at = len(producing.acked)
        wait_for(lambda: any("restarted as pid" in line for line in srv.stderr_lines), 60)
        resumed = len(producing.acked)
        wait_for(lambda: len(producing.acked) > resumed + 500, 60)  # the same port again
        producing.stop.set()
        producing.join(30)
        request = pb.ReadRequest(topic=name, position=pb.EARLIEST)
        read = [m for reply in grpc_log.Read(request, timeout=30) for m in reply.messages]
        stored = {m.id.entry_id: (m.key, m.value) for m in read}
    finally:
        channel.close()
        assert srv.stop() == 0
    acked = producing.acked
    assert len(acked) > killed_at
    missing = [a for a in acked if stored.get(a[0]) != (a[1], a[2])]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged records lost: {missing[:3]}"


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().replace(b"\0", b" ").decode() + " "
