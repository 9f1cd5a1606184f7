"""The listener on raw sockets: what it answers to requests no client library would
send (an API it does not serve, a version above ours, garbage), and Fetch's long poll.
Requests are encoded with kio, the listener's own protocol library."""

from __future__ import annotations

import datetime
import io
import socket
import struct
import threading
import time
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc

kio_serial = pytest.importorskip("kio.serial")
from aiokafka.record.default_records import (  # noqa: E402
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)
from kio.schema.api_versions.v0.response import ApiVersionsResponse as VersionsV0  # noqa: E402
from kio.schema.api_versions.v3.request import ApiVersionsRequest  # noqa: E402
from kio.schema.api_versions.v3.response import ApiVersionsResponse  # noqa: E402
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest  # noqa: E402
from kio.schema.describe_cluster.v0.response import DescribeClusterResponse  # noqa: E402
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.fetch.v12 import request as fetch_req  # noqa: E402
from kio.schema.fetch.v12.response import FetchResponse  # noqa: E402
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest  # noqa: E402
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse  # noqa: E402
from kio.schema.produce.v9 import request as produce_req  # noqa: E402
from kio.schema.produce.v9.response import ProduceResponse  # noqa: E402
from kio.static.primitive import i32Timedelta  # noqa: E402


def frame(request: Any, correlation_id: int, version: int | None = None) -> bytes:
    out = io.BytesIO()
    header_cls = request.__header_schema__
    header = header_cls(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__ if version is None else version,
        correlation_id=correlation_id,
        client_id="wire-test",
    )
    kio_serial.entity_writer(header_cls)(out, header)
    kio_serial.entity_writer(type(request))(out, request)
    return struct.pack(">i", len(out.getvalue())) + out.getvalue()


def receive(sock: socket.socket) -> bytes:
    """One response frame, or b"" when the server closed the connection."""
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return b""
    return sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)


def decode(cls: Any, data: bytes, correlation_id: int) -> Any:
    assert struct.unpack_from(">i", data)[0] == correlation_id
    offset = 5 if cls.__header_schema__.__flexible__ else 4  # tagged fields: one 0 byte
    return kio_serial.entity_reader(cls)(data, offset)[0]


def connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    return sock


def api_versions(sock: socket.socket, correlation_id: int) -> Any:
    request = ApiVersionsRequest(client_software_name="wire", client_software_version="1")
    sock.sendall(frame(request, correlation_id))
    return decode(ApiVersionsResponse, receive(sock), correlation_id)


def test_api_versions_lists_what_is_served(kafka_server: ServerProcess) -> None:
    with connect(kafka_server.kafka_address) as sock:
        response = api_versions(sock, 1)
    served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert response.error_code == ErrorCode.none
    assert served[0] == (3, 9) and served[1] == (4, 12) and served[18] == (0, 4)


def test_a_version_above_ours_gets_kip511s_answer(kafka_server: ServerProcess) -> None:
    request = ApiVersionsRequest(client_software_name="wire", client_software_version="1")
    with connect(kafka_server.kafka_address) as sock:
        sock.sendall(frame(request, 7, version=9))
        response = decode(VersionsV0, receive(sock), 7)
        assert response.error_code == ErrorCode.unsupported_version
        assert 18 in {k.api_key for k in response.api_keys}
        assert api_versions(sock, 8).error_code == ErrorCode.none  # still open


def test_unserved_apis_are_answered_and_the_connection_stays(kafka_server: ServerProcess) -> None:
    describe = DescribeClusterRequest(include_cluster_authorized_operations=False)
    with connect(kafka_server.kafka_address) as sock:
        sock.sendall(frame(describe, 11))  # known to kio, not served
        answered = decode(DescribeClusterResponse, receive(sock), 11)
        assert answered.error_code == ErrorCode.unsupported_version
        # An API key nobody knows: the correlation id and UNSUPPORTED_VERSION.
        body = struct.pack(">hhih", 999, 0, 12, -1)
        sock.sendall(struct.pack(">i", len(body)) + body)
        assert receive(sock) == struct.pack(">ih", 12, ErrorCode.unsupported_version.value)
        assert api_versions(sock, 13).error_code == ErrorCode.none


def init_producer_id(transactional_id: str | None) -> InitProducerIdRequest:
    timeout = i32Timedelta.parse(datetime.timedelta(seconds=60))
    return InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout=timeout)


def test_init_producer_id_hands_out_ids_and_refuses_transactions(
    kafka_server: ServerProcess,
) -> None:
    with connect(kafka_server.kafka_address) as sock:
        answers = []
        for correlation_id in (21, 22):
            sock.sendall(frame(init_producer_id(None), correlation_id))
            answers.append(decode(InitProducerIdResponse, receive(sock), correlation_id))
        assert [a.error_code for a in answers] == [ErrorCode.none] * 2
        assert [a.producer_epoch for a in answers] == [0, 0]
        first, second = (a.producer_id for a in answers)
        assert second > first > 2**40  # seeded from the clock: a restart repeats none
        sock.sendall(frame(init_producer_id("txn-1"), 23))
        refused = decode(InitProducerIdResponse, receive(sock), 23)
        assert refused.error_code == ErrorCode.transactional_id_authorization_failed
        assert refused.producer_id == -1


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", -5),  # a negative size
        struct.pack(">i", 200 * 1024 * 1024),  # over socket.request.max.bytes
        struct.pack(">ihhih", 12, 3, 12, 1, 30000) + b"xx",  # a client id past the frame
    ],
    ids=["negative-size", "oversized", "short-body"],
)
def test_garbage_closes_only_its_connection(
    kafka_server: ServerProcess, grpc_side: Grpc, garbage: bytes
) -> None:
    with connect(kafka_server.kafka_address) as other, connect(kafka_server.kafka_address) as bad:
        assert api_versions(other, 1).error_code == ErrorCode.none
        bad.sendall(garbage)
        assert receive(bad) == b""  # closed
        assert api_versions(other, 2).error_code == ErrorCode.none
    grpc_side.admin.ListTopics(pb.ListTopicsRequest(), timeout=10)


def fetch_request(topic: str, wait_ms: int) -> Any:
    partition = fetch_req.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    return fetch_req.FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=wait_ms)),
        min_bytes=1,
        topics=(fetch_req.FetchTopic(topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def test_fetch_long_polls_until_an_append(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    with connect(kafka_server.kafka_address) as sock:
        started = time.monotonic()
        sock.sendall(frame(fetch_request(topic, 300), 1))
        empty = decode(FetchResponse, receive(sock), 1)
        assert time.monotonic() - started >= 0.29  # nothing came: max_wait_ms ran out
        assert empty.responses[0].partitions[0].records in (b"", None)

        sock.sendall(frame(fetch_request(topic, 20_000), 2))
        publisher = threading.Timer(
            0.5,
            grpc_side.log.Publish,
            args=(pb.PublishRequest(topic=topic, records=[pb.Record(key=b"k", value=b"v")]),),
        )
        publisher.start()
        started = time.monotonic()
        woken = decode(FetchResponse, receive(sock), 2)
        publisher.join()
    assert time.monotonic() - started < 10  # the append woke it, not the 20 s deadline
    part = woken.responses[0].partitions[0]
    assert part.high_watermark == 1
    [record] = list(DefaultRecordBatch(part.records))
    assert (record.offset, record.key, record.value) == (0, b"k", b"v")


def produce_request(topic: str, values: list[bytes], corrupt: bool = False) -> Any:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
    for i, value in enumerate(values):
        builder.append(i, 1000 + i, b"k", value, [])
    records = bytearray(builder.build())
    if corrupt:
        records[-1] ^= 1  # the CRC no longer matches
    part = produce_req.PartitionProduceData(index=0, records=bytes(records))
    return produce_req.ProduceRequest(
        acks=-1,
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(produce_req.TopicProduceData(name=topic, partition_data=(part,)),),
    )


def test_pipelined_produces_are_answered_in_order(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    """Produces sent without waiting (as librdkafka does) are appended and answered in
    the order sent; a bad one fails alone; another API between them waits its turn."""
    grpc_side.create(topic)
    sent = [[b"%d-%d" % (n, i) for i in range(3)] for n in range(12)]
    frames = [frame(produce_request(topic, values, n == 4), n) for n, values in enumerate(sent)]
    versions = ApiVersionsRequest(client_software_name="wire", client_software_version="1")
    frames.insert(8, frame(versions, 100))
    with connect(kafka_server.kafka_address) as sock:
        sock.sendall(b"".join(frames))
        answers = [receive(sock) for _ in frames]
    ids = [struct.unpack_from(">i", a)[0] for a in answers]
    assert ids == [*range(8), 100, *range(8, 12)]
    assert decode(ApiVersionsResponse, answers.pop(8), 100).error_code == ErrorCode.none
    parts = [
        decode(ProduceResponse, a, n).responses[0].partition_responses[0]
        for n, a in enumerate(answers)
    ]
    assert parts[4].error_code == ErrorCode.corrupt_message
    stored = [values for n, values in enumerate(sent) if n != 4]
    assert [p.base_offset for n, p in enumerate(parts) if n != 4] == [3 * i for i in range(11)]
    assert [p.error_code for n, p in enumerate(parts) if n != 4] == [ErrorCode.none] * 11
    assert [m.value for m in grpc_side.read(topic)] == [v for vs in stored for v in vs]


def test_fetch_with_data_ready_answers_at_once(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    """Records already there are answered as soon as read, not after ``max_wait_ms``."""
    grpc_side.create(topic)
    records = [pb.Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(3)]
    grpc_side.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)
    with connect(kafka_server.kafka_address) as sock:
        started = time.monotonic()
        sock.sendall(frame(fetch_request(topic, 60_000), 1))
        answered = decode(FetchResponse, receive(sock), 1)
    assert time.monotonic() - started < 30  # the 60 s max_wait_ms was not waited out
    part = answered.responses[0].partitions[0]
    got = [(r.offset, r.key, r.value) for r in DefaultRecordBatch(part.records)]
    assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(3)]


def test_leave_group_before_v3_answers_with_its_top_code(kafka_server: ServerProcess) -> None:
    from kio.schema.leave_group.v1.request import LeaveGroupRequest
    from kio.schema.leave_group.v1.response import LeaveGroupResponse

    with connect(kafka_server.kafka_address) as sock:  # librdkafka's close() sends v1
        sock.sendall(frame(LeaveGroupRequest(group_id="never-joined", member_id="m-1"), 9))
        answer = decode(LeaveGroupResponse, receive(sock), 9)
    assert answer.error_code == ErrorCode.unknown_member_id
