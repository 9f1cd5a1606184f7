"""The client's producer on a partitioned topic routes as Kafka's default partitioner."""

from __future__ import annotations

import grpc

from compactlog.client import Client
from compactlog.partitioner import partition_for_key
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


def test_producer_routes_by_murmur2(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    with Client(shared_server.address) as client:
        info = client.create_topic(unique_topic, partitions=4)
        assert info.partitions == 4
        producer = client.producer(unique_topic)
        keys = [b"user-%d" % i for i in range(20)]
        for key in keys:
            producer.send(key, b"x")
        producer.send_batch([(k, b"y") for k in keys])  # spans partitions: the server splits
        producer.send(None, b"keyless")
        for p in range(4):
            read = list(client.reader(f"{unique_topic}-partition-{p}"))
            got = [m.key for m in read if m.value != b"keyless"]
            want = [k for k in keys if partition_for_key(k, 4) == p]
            assert got == want + want
        assert client.add_partitions(unique_topic, 6).partitions == 6
    # The ids of messages read through a partition name carry its index (raw wire).
    with grpc.insecure_channel(shared_server.address) as channel:
        req = pb.ReadRequest(topic=f"{unique_topic}-partition-2")
        read = pb_grpc.LogStub(channel).Read(req)
        assert {m.id.partition for r in read for m in r.messages} == {2}
