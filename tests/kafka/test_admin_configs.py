"""Topic configs through Kafka's admin clients against a real server: DescribeConfigs,
IncrementalAlterConfigs and AlterConfigs from confluent-kafka's AdminClient, kafka-python's
KafkaAdminClient and aiokafka's AIOKafkaAdminClient; each change read back through gRPC
GetTopic (the same effective config, the same overrides)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import KAFKA_ARGS, Grpc

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka.admin import ConfigResource as KpResource  # noqa: E402
from kafka.admin import ConfigResourceType  # noqa: E402

DYNAMIC_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
STATIC_BROKER = ConfigSource.STATIC_BROKER_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value


def topic_info(grpc_side: Grpc, name: str) -> pb.TopicInfo:
    return grpc_side.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30)


def overrides_of(grpc_side: Grpc, name: str) -> dict[str, str]:
    info = topic_info(grpc_side, name)
    return {k: info.config[k] for k in info.config_overrides}


def describe(admin: AdminClient, kind: Any, name: str) -> dict[str, Any]:
    (future,) = admin.describe_configs([ConfigResource(kind, name)]).values()
    result: dict[str, Any] = future.result(30)
    return result


def alter(admin: AdminClient, name: str, *ops: tuple[str, str | None, Any], **kw: Any) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
    (future,) = admin.incremental_alter_configs([resource], **kw).values()
    future.result(30)


def kafka_code(raised: pytest.ExceptionInfo[Any]) -> int:
    code: int = raised.value.args[0].code()
    return code


@pytest.fixture
def admin(kafka_server: ServerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_server.kafka_address})


def test_describe_configs_matches_get_topic(
    admin: AdminClient, grpc_side: Grpc, topic: str
) -> None:
    config = {"cleanup.policy": "compact", "segment.bytes": "1048576"}
    grpc_side.admin.CreateTopic(
        pb.CreateTopicRequest(name=topic, kind=pb.SEGMENTED, config=config), timeout=30
    )
    described = describe(admin, ResourceType.TOPIC, topic)
    info = topic_info(grpc_side, topic)
    assert {k: e.value for k, e in described.items()} == dict(info.config)
    for name, entry in described.items():
        assert entry.source == (DYNAMIC_TOPIC if name in config else DEFAULT), name
        assert entry.is_default is (name not in config)
        assert not entry.is_read_only and not entry.is_sensitive
    assert described["cleanup.policy"].value == "compact"
    assert described["segment.bytes"].value == "1048576"
    assert described["retention.ms"].value == "604800000"  # the SEGMENTED default


def test_incremental_alter_configs_is_update_topic_config(
    admin: AdminClient, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    alter(
        admin,
        topic,
        ("retention.ms", "60000", AlterConfigOpType.SET),
        ("cleanup.policy", "compact", AlterConfigOpType.APPEND),
        ("min.cleanable.dirty.ratio", "0.25", AlterConfigOpType.SET),
    )
    assert overrides_of(grpc_side, topic) == {
        "retention.ms": "60000",
        "cleanup.policy": "compact,delete",
        "min.cleanable.dirty.ratio": "0.25",
    }
    alter(
        admin,
        topic,
        ("retention.ms", None, AlterConfigOpType.DELETE),
        ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
    )
    assert overrides_of(grpc_side, topic) == {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.25",
    }
    described = describe(admin, ResourceType.TOPIC, topic)
    assert described["retention.ms"].value == "604800000"
    assert described["retention.ms"].source == DEFAULT
    assert described["cleanup.policy"].source == DYNAMIC_TOPIC


def test_refused_and_validate_only_changes_leave_the_topic_as_it_was(
    admin: AdminClient, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    before = dict(topic_info(grpc_side, topic).config)
    refused = [
        ("no.such.key", "1", AlterConfigOpType.SET),
        ("segment.bytes", "13", AlterConfigOpType.SET),  # Kafka's minimum is 14
        ("retention.ms", "1", AlterConfigOpType.APPEND),  # not a list config
        ("min.compaction.lag.ms", "10", AlterConfigOpType.SET),  # above max.compaction.lag.ms
    ]
    alter(admin, topic, ("max.compaction.lag.ms", "5", AlterConfigOpType.SET))
    before = dict(topic_info(grpc_side, topic).config)
    for op in refused:
        with pytest.raises(ck.KafkaException) as raised:
            alter(admin, topic, ("flush.ms", "1000", AlterConfigOpType.SET), op)
        assert kafka_code(raised) == ck.KafkaError.INVALID_CONFIG, op
        assert dict(topic_info(grpc_side, topic).config) == before, op
    alter(admin, topic, ("retention.ms", "1000", AlterConfigOpType.SET), validate_only=True)
    assert dict(topic_info(grpc_side, topic).config) == before
    with pytest.raises(ck.KafkaException) as raised:
        alter(admin, topic, ("segment.bytes", "13", AlterConfigOpType.SET), validate_only=True)
    assert kafka_code(raised) == ck.KafkaError.INVALID_CONFIG


def test_partitioned_and_ledger_topics(admin: AdminClient, grpc_side: Grpc, topic: str) -> None:
    grpc_side.create(topic, partitions=3)
    alter(admin, topic, ("retention.bytes", "1000000", AlterConfigOpType.SET))
    for part in range(3):  # every partition took the change, as gRPC's does
        assert overrides_of(grpc_side, f"{topic}-partition-{part}") == {
            "retention.bytes": "1000000"
        }
    assert describe(admin, ResourceType.TOPIC, topic)["retention.bytes"].value == "1000000"
    grpc_side.create(topic + "-ledger", kind=pb.LEDGER)
    for call in (
        lambda: describe(admin, ResourceType.TOPIC, topic + "-ledger"),
        lambda: describe(admin, ResourceType.TOPIC, topic + "-nowhere"),
        lambda: alter(admin, topic + "-ledger", ("retention.ms", "1", AlterConfigOpType.SET)),
    ):
        with pytest.raises(ck.KafkaException) as raised:
            call()
        assert kafka_code(raised) == ck.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_broker_configs_describe_and_refuse_changes(admin: AdminClient) -> None:
    broker = describe(admin, ResourceType.BROKER, "0")
    assert broker["log.cleaner.threads"].value == "1"
    assert broker["log.cleaner.threads"].source == DEFAULT
    assert broker["publish.durability"].value == "fsync"
    assert all(e.is_read_only for e in broker.values())
    resource = ConfigResource(
        ResourceType.BROKER,
        "0",
        incremental_configs=[
            ConfigEntry("log.cleaner.threads", "2", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = admin.incremental_alter_configs([resource]).values()
    with pytest.raises(ck.KafkaException) as raised:
        future.result(30)
    assert kafka_code(raised) == ck.KafkaError.INVALID_REQUEST
    assert describe(admin, ResourceType.BROKER, "0")["log.cleaner.threads"].value == "1"


@pytest.fixture(scope="module")
def configured_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("kafka-config")
    config = root / "server.toml"
    config.write_text('"log.cleaner.threads" = 2\n"retention.ms" = 3600000\n')
    srv = ServerProcess(root / "data", config=config, extra_args=KAFKA_ARGS).start()
    yield srv
    assert srv.stop() == 0


def test_server_file_values_are_static_broker_config(
    configured_server: ServerProcess, topic: str
) -> None:
    grpc_side = Grpc(configured_server.address)
    try:
        grpc_side.create(topic)
        admin = AdminClient({"bootstrap.servers": configured_server.kafka_address})
        retention = describe(admin, ResourceType.TOPIC, topic)["retention.ms"]
        assert retention.value == "3600000" == topic_info(grpc_side, topic).config["retention.ms"]
        assert retention.source == STATIC_BROKER
        alter(admin, topic, ("retention.ms", "1000", AlterConfigOpType.SET))
        retention = describe(admin, ResourceType.TOPIC, topic)["retention.ms"]
        assert (retention.value, retention.source) == ("1000", DYNAMIC_TOPIC)
        kp = kafka.KafkaAdminClient(bootstrap_servers=configured_server.kafka_address)
        try:  # the synonyms: every layer that holds a value, strongest first
            described = kp.describe_configs(
                [KpResource(ConfigResourceType.TOPIC, topic, configs=["retention.ms"])],
                include_synonyms=True,
            )
        finally:
            kp.close()
        synonyms = described["topic"][topic]["retention.ms"]["synonyms"]
        assert [(s["value"], s["source"]) for s in synonyms] == [
            ("1000", "DYNAMIC_TOPIC_CONFIG"),
            ("3600000", "STATIC_BROKER_CONFIG"),
            ("604800000", "DEFAULT_CONFIG"),
        ]
        broker = describe(admin, ResourceType.BROKER, "0")
        assert (broker["log.cleaner.threads"].value, broker["log.cleaner.threads"].source) == (
            "2",
            STATIC_BROKER,
        )
        assert broker["retention.ms"].value == "3600000"
    finally:
        grpc_side.channel.close()


def test_kafka_python_describe_alter_and_reset(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    admin = kafka.KafkaAdminClient(bootstrap_servers=kafka_server.kafka_address)
    try:
        resource = KpResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": "120000"})
        assert admin.alter_configs([resource]) == {"topic": {topic: "OK"}}  # incremental
        legacy = KpResource(ConfigResourceType.TOPIC, topic, configs={"flush.messages": "10"})
        assert admin.alter_configs([legacy], incremental=False) == {"topic": {topic: "OK"}}
        assert overrides_of(grpc_side, topic) == {"segment.ms": "120000", "flush.messages": "10"}
        modified = admin.describe_configs([KpResource(ConfigResourceType.TOPIC, topic)])
        got = modified["topic"][topic]
        assert {k: v["value"] for k, v in got.items()} == overrides_of(grpc_side, topic)
        assert {v["config_source"] for v in got.values()} == {"DYNAMIC_TOPIC_CONFIG"}
        reset = KpResource(ConfigResourceType.TOPIC, topic, configs=["segment.ms"])
        assert admin.reset_configs([reset]) == {"topic": {topic: "OK"}}
        assert overrides_of(grpc_side, topic) == {"flush.messages": "10"}
        broker = KpResource(ConfigResourceType.BROKER, "0", configs={"log.cleaner.threads": "3"})
        answer = admin.alter_configs([broker], raise_on_unknown=False)
        assert "InvalidRequest" in answer["broker"]["0"]
    finally:
        admin.close()


def test_aiokafka_describe_and_legacy_alter_configs(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AioResource
    from aiokafka.admin.config_resource import ConfigResourceType as AioType

    grpc_side.admin.CreateTopic(
        pb.CreateTopicRequest(name=topic, kind=pb.SEGMENTED, config={"retention.ms": "5000"}),
        timeout=30,
    )

    async def run() -> tuple[Any, Any]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_server.kafka_address)
        await admin.start()
        try:
            resource = AioResource(AioType.TOPIC, topic, {"cleanup.policy": "compact"})
            altered = await admin.alter_configs([resource])
            described = await admin.describe_configs([AioResource(AioType.TOPIC, topic)])
            return altered, described
        finally:
            await admin.close()

    altered, described = asyncio.run(run())
    (response,) = altered
    assert [(code, name) for code, _message, _type, name in response.resources] == [(0, topic)]
    # the legacy call replaces the overrides: retention.ms went back to its default
    assert overrides_of(grpc_side, topic) == {"cleanup.policy": "compact"}
    ((_code, _message, _type, name, entries),) = described[0].resources
    assert name == topic
    values = {entry[0]: entry[1] for entry in entries}
    assert values == dict(topic_info(grpc_side, topic).config)
