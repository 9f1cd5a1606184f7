"""One ``compactlog serve --kafka-listen 127.0.0.1:0`` process for the Kafka tests of a
module, gRPC helpers to compare what Kafka clients see with what gRPC serves, and the
one way these tests start a kafka-python group consumer."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess

KAFKA_ARGS = ("--kafka-listen", "127.0.0.1:0")


class Grpc:
    """The gRPC side of the same server."""

    def __init__(self, address: str, channel: grpc.Channel | None = None) -> None:
        self.channel = channel or grpc.insecure_channel(address)  # given: tokens, TLS
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def create(self, name: str, kind: int = pb.SEGMENTED, partitions: int = 0) -> None:
        request = pb.CreateTopicRequest(name=name, kind=kind, partitions=partitions)
        self.admin.CreateTopic(request, timeout=30)

    def read(self, topic: str) -> list[Any]:
        """Every message of ``topic`` (a partitioned one: all partitions), as gRPC gives."""
        request = pb.ReadRequest(topic=topic, position=pb.EARLIEST)
        return [m for reply in self.log.Read(request, timeout=30) for m in reply.messages]


@pytest.fixture(scope="module")
def kafka_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data: Path = tmp_path_factory.mktemp("kafka") / "data"
    srv = ServerProcess(data, extra_args=KAFKA_ARGS).start()
    assert srv.kafka_address.startswith("127.0.0.1:")
    yield srv
    assert srv.stop() == 0  # a clean stop with Kafka connections open


@pytest.fixture(scope="module")
def grpc_side(kafka_server: ServerProcess) -> Iterator[Grpc]:
    side = Grpc(kafka_server.address)
    yield side
    side.channel.close()


@pytest.fixture
def topic() -> str:
    return "k-" + uuid.uuid4().hex[:12]


def kafka_python_group_consumer(topic: str, **config: Any) -> Any:
    """A kafka-python consumer subscribed to ``topic`` that knows the topic's partitions
    before its first poll joins the group.

    kafka-python (3.0.12) joins on the first poll whether or not its metadata has the
    topic yet; the leader then assigns nothing, the metadata that arrives next makes it
    join again, and when that second JoinGroup and SyncGroup outlast the poll's timeout
    the client never applies their answer: it sends no heartbeat and no fetch until it
    closes (the server drops the member after its session timeout, so the LeaveGroup
    then gets UNKNOWN_MEMBER_ID). A loaded machine opens that window; reading the
    topic's metadata first closes it."""
    import kafka  # only where kafka-python is installed (the tests importorskip it)

    consumer = kafka.KafkaConsumer(topic, **config)
    assert consumer.partitions_for_topic(topic), f"no metadata for {topic!r}"
    return consumer
