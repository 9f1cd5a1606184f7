"""``serve --kafka-listen --shards 2`` on partition placement, one topic's partitions on
both brokers (docs/kafka.md, "Partition placement"): a ``validate_only`` CreateTopics
or CreatePartitions answers what the change itself answers, whichever slot refuses it
(a name taken, a config refused), and makes nothing. Real clients (confluent-kafka)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import KAFKA_ARGS, Grpc
from tests.kafka.test_partition_placement import fresh

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402
from kio.schema.errors import ErrorCode  # noqa: E402

COUNT = 4  # four consecutive slots: partitions on both brokers


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base: Path = tmp_path_factory.mktemp("kafka-placement-down")
    config = base / "config.toml"
    config.write_text('"shards.placement" = "partition"\n')
    srv = ServerProcess(base / "data", config, ["--shards", "2", *KAFKA_ARGS]).start()
    yield srv
    assert srv.stop() == 0


@pytest.fixture(scope="module")
def side(spread: ServerProcess) -> Iterator[Grpc]:
    front = Grpc(spread.address)
    yield front
    front.channel.close()


def outcome(future: Any) -> ErrorCode:
    """The Kafka error code a client's future ended with (``none``: it succeeded)."""
    try:
        future.result(30)
    except KafkaException as exc:
        return ErrorCode(exc.args[0].code())
    return ErrorCode.none


Change = Callable[[bool], Any]


def checked_then_made(change: Change) -> tuple[ErrorCode, ErrorCode]:
    """``change``'s code validated only, then its code made."""
    return outcome(change(True)), outcome(change(False))


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


def test_validate_only_answers_what_the_change_would(spread: ServerProcess, side: Grpc) -> None:
    """Each refusal comes from a slot other than the topic's own (a partition's name
    taken there), or from every slot (a bad config); validated or made, the same code,
    and a validation makes nothing."""
    admin = AdminClient({"bootstrap.servers": spread.kafka_address})
    clash, grown, fine = fresh("clash"), fresh("grown"), fresh("fine")
    side.create(f"{clash}-partition-{COUNT - 1}")  # a topic of its own, in a far slot
    side.create(f"{grown}-partition-{COUNT + 1}")
    assert checked_then_made(creating(admin, clash)) == (ErrorCode.topic_already_exists,) * 2
    assert partitions(side, clash) == 0
    bad = creating(admin, fine, **{"cleanup.policy": "shred"})
    assert checked_then_made(bad) == (ErrorCode.invalid_config,) * 2
    assert outcome(creating(admin, grown)(False)) == ErrorCode.none
    assert (
        checked_then_made(growing(admin, grown, COUNT + 2)) == (ErrorCode.topic_already_exists,) * 2
    )
    assert partitions(side, grown) == COUNT

    assert outcome(creating(admin, fine)(True)) == ErrorCode.none
    assert partitions(side, fine) == 0
    assert outcome(growing(admin, grown, COUNT + 1)(True)) == ErrorCode.none
    assert partitions(side, grown) == COUNT
