"""The config and admin APIs on raw sockets: what they answer to requests the client
libraries check before sending (a key named twice, an unknown operation, a broker that is
not this one, assignments to other brokers), and what they carry that the libraries do not
show (config types and documentation). Requests are encoded with kio."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.create_partitions.v3 import request as cp_req
from kio.schema.create_partitions.v3.response import CreatePartitionsResponse
from kio.schema.delete_records.v2 import request as dr_req
from kio.schema.delete_records.v2.response import DeleteRecordsResponse
from kio.schema.describe_configs.v4 import request as dc_req
from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as ia_req
from kio.schema.incremental_alter_configs.v1.response import (
    IncrementalAlterConfigsResponse,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka import test_wire as wire
from tests.kafka.conftest import Grpc

TOPIC, BROKER = i8(2), i8(4)
TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))


def call(address: str, request: Any, response_cls: Any) -> Any:
    with wire.connect(address) as sock:
        sock.sendall(wire.frame(request, 5))
        return wire.decode(response_cls, wire.receive(sock), 5)


def describe(address: str, kind: i8, name: str, **kw: Any) -> Any:
    resource = dc_req.DescribeConfigsResource(
        resource_type=kind, resource_name=name, configuration_keys=None
    )
    request = dc_req.DescribeConfigsRequest(resources=(resource,), **kw)
    (result,) = call(address, request, DescribeConfigsResponse).results
    return result


def alter(address: str, name: str, *ops: tuple[str, int, str | None]) -> Any:
    configs = tuple(
        ia_req.AlterableConfig(name=k, config_operation=i8(op), value=v) for k, op, v in ops
    )
    resource = ia_req.AlterConfigsResource(resource_type=TOPIC, resource_name=name, configs=configs)
    request = ia_req.IncrementalAlterConfigsRequest(resources=(resource,), validate_only=False)
    (answer,) = call(address, request, IncrementalAlterConfigsResponse).responses
    return answer


def overrides(grpc_side: Grpc, name: str) -> list[str]:
    info = grpc_side.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30)
    return sorted(info.config_overrides)


def test_alter_requests_clients_would_not_send(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    address = kafka_server.kafka_address
    twice = alter(address, topic, ("retention.ms", 0, "1000"), ("retention.ms", 1, None))
    assert twice.error_code == ErrorCode.invalid_request
    assert "retention.ms" in twice.error_message
    assert alter(address, topic, ("retention.ms", 7, "1")).error_code == ErrorCode.invalid_request
    assert alter(address, topic, ("retention.ms", 0, None)).error_code == ErrorCode.invalid_request
    assert overrides(grpc_side, topic) == []  # nothing of them was applied
    assert alter(address, topic, ("retention.ms", 0, "1000")).error_code == ErrorCode.none
    assert overrides(grpc_side, topic) == ["retention.ms"]


def test_describe_configs_types_documentation_and_resources(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    address = kafka_server.kafka_address
    result = describe(address, TOPIC, topic, include_documentation=True)
    assert result.error_code == ErrorCode.none
    by_name = {c.name: c for c in result.configs}
    # Kafka's ConfigDef types: LIST 7, INT 3, LONG 5, DOUBLE 6
    assert by_name["cleanup.policy"].config_type == 7
    assert by_name["segment.bytes"].config_type == 3
    assert by_name["retention.ms"].config_type == 5
    assert by_name["min.cleanable.dirty.ratio"].config_type == 6
    assert by_name["segment.bytes"].documentation == "segment size before a roll"
    assert describe(address, BROKER, "").configs == ()  # no dynamic cluster defaults
    assert describe(address, BROKER, "1").error_code == ErrorCode.invalid_request
    assert describe(address, i8(99), "x").error_code == ErrorCode.invalid_request
    loggers = {c.name: c.value for c in describe(address, i8(8), "0").configs}
    assert loggers["root"] in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")


def test_create_partitions_assignments_and_duplicates(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic, partitions=2)

    def grow(*topics: tuple[str, int, tuple[tuple[int, ...], ...] | None]) -> list[Any]:
        request = cp_req.CreatePartitionsRequest(
            topics=tuple(
                cp_req.CreatePartitionsTopic(
                    name=TopicName(name),
                    count=i32(count),
                    assignments=None
                    if assignments is None
                    else tuple(
                        cp_req.CreatePartitionsAssignment(
                            broker_ids=tuple(BrokerId(i32(b)) for b in brokers)
                        )
                        for brokers in assignments
                    ),
                )
                for name, count, assignments in topics
            ),
            timeout=TIMEOUT,
            validate_only=False,
        )
        return list(call(kafka_server.kafka_address, request, CreatePartitionsResponse).results)

    (other,) = grow((topic, 3, ((1,),)))
    assert other.error_code == ErrorCode.invalid_replica_assignment
    (short,) = grow((topic, 4, ((0,),)))
    assert short.error_code == ErrorCode.invalid_replica_assignment
    both = grow((topic, 3, None), (topic, 4, None))
    assert [r.error_code for r in both] == [ErrorCode.invalid_request] * 2
    info = grpc_side.admin.GetTopic(pb.GetTopicRequest(name=topic), timeout=30)
    assert info.partitions == 2
    (grown,) = grow((topic, 4, ((0,), (0,))))
    assert grown.error_code == ErrorCode.none
    info = grpc_side.admin.GetTopic(pb.GetTopicRequest(name=topic), timeout=30)
    assert info.partitions == 4


def test_delete_records_below_minus_one_is_out_of_range(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    partition = dr_req.DeleteRecordsPartition(partition_index=i32(0), offset=i64(-5))
    request = dr_req.DeleteRecordsRequest(
        topics=(dr_req.DeleteRecordsTopic(name=TopicName(topic), partitions=(partition,)),),
        timeout=TIMEOUT,
    )
    (answer,) = call(kafka_server.kafka_address, request, DeleteRecordsResponse).topics
    (part,) = answer.partitions
    assert (part.error_code, part.low_watermark) == (ErrorCode.offset_out_of_range, -1)
