"""CONTRACT section 12, reads: big messages read end to end in bounded responses, and a
Consume that fails moves no cursor. Against the real server process; response sizes are
measured on the client with raw-bytes calls (no deserializer), so what is counted is
exactly what came over the wire."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

MB = 1_000_000
RESPONSE_CAP = 4 * 1024 * 1024  # CONTRACT section 12
BIG_CONFIG = {"max.message.bytes": str(1_100_000)}
KINDS = [pb.LEDGER, pb.SEGMENTED]


class Raw:
    """Read and Consume answering response bytes, as they came over the wire."""

    def __init__(self, address: str, max_receive: int | None = None) -> None:
        options = [("grpc.max_send_message_length", -1)]
        if max_receive is not None:
            options.append(("grpc.max_receive_message_length", max_receive))
        self.channel = grpc.insecure_channel(address, options=options)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)
        self._read = self.channel.unary_stream(
            "/compactlog.v1.Log/Read", request_serializer=pb.ReadRequest.SerializeToString
        )
        self._consume = self.channel.unary_unary(
            "/compactlog.v1.Log/Consume", request_serializer=pb.ConsumeRequest.SerializeToString
        )

    def read(self, req: pb.ReadRequest) -> list[bytes]:
        return list(self._read(req, timeout=120))

    def consume(self, **fields: Any) -> bytes:
        raw: bytes = self._consume(pb.ConsumeRequest(**fields), timeout=60)
        return raw

    def publish_big(self, topic: str, count: int, size: int = MB, per_request: int = 10) -> None:
        for first in range(0, count, per_request):
            records = [
                pb.Record(key=b"k%03d" % i, value=b"%08d" % i + bytes(size - 8))
                for i in range(first, min(count, first + per_request))
            ]
            self.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=60)

    def close(self) -> None:
        self.channel.close()


@pytest.fixture
def raw(shared_server: Any) -> Iterator[Raw]:
    client = Raw(shared_server.address)  # gRPC's default 4 MiB receive limit
    yield client
    client.close()


def messages(responses: list[bytes]) -> list[pb.Message]:
    return [m for r in responses for m in pb.ReadResponse.FromString(r).messages]


def numbers(msgs: list[pb.Message]) -> list[int]:
    return [int(m.value[:8]) for m in msgs]


def ids(msgs: list[pb.Message]) -> list[tuple[int, int]]:
    return [(m.id.ledger_id, m.id.entry_id) for m in msgs]


@pytest.mark.parametrize("kind", KINDS, ids=["ledger", "segmented"])
def test_a_topic_of_1mb_messages_reads_end_to_end(raw: Raw, unique_topic: str, kind: int) -> None:
    """70 messages of 1 MB (the issue's case) through a client with gRPC's default receive
    limit: Read raw (and compacted), and Consume with acks; no response over 4 MiB."""
    raw.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic, kind=kind, config=BIG_CONFIG))
    raw.publish_big(unique_topic, 70)

    views = [False, True] if kind == pb.LEDGER else [False]
    if kind == pb.LEDGER:
        status = raw.admin.Compact(pb.CompactRequest(topic=unique_topic, wait=True), timeout=120)
        assert status.state == pb.CompactionStatus.SUCCESS
    for compacted in views:
        responses = raw.read(pb.ReadRequest(topic=unique_topic, read_compacted=compacted))
        assert max(len(r) for r in responses) <= RESPONSE_CAP
        assert len(responses) >= 70 * MB // RESPONSE_CAP + 1
        got = messages(responses)
        assert numbers(got) == list(range(70))
        assert ids(got) == sorted(ids(got))

    delivered: list[pb.Message] = []
    sizes: list[int] = []
    while True:
        reply = raw.consume(topic=unique_topic, subscription="s", wait_ms=0)
        if not reply:
            break
        sizes.append(len(reply))
        batch = list(pb.ConsumeResponse.FromString(reply).messages)
        delivered += batch
        ack = pb.AcknowledgeRequest(topic=unique_topic, subscription="s", cumulative=True)
        ack.id.CopyFrom(batch[-1].id)
        raw.log.Acknowledge(ack, timeout=30)
    assert max(sizes) <= RESPONSE_CAP
    assert numbers(delivered) == list(range(70))


def test_only_a_message_alone_passes_the_cap(shared_server: Any, unique_topic: str) -> None:
    """max.message.bytes raised to 6 MB: a 5 MB message is readable, alone in its
    response; the small ones around it still come in responses under 4 MiB."""
    client = Raw(shared_server.address, max_receive=-1)
    try:
        config = {"max.message.bytes": str(6 * MB)}
        client.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic, config=config))
        client.publish_big(unique_topic, 3)
        client.publish_big(unique_topic, 1, size=5 * MB)
        client.publish_big(unique_topic, 3)
        responses = client.read(pb.ReadRequest(topic=unique_topic))
        per_response = [messages([r]) for r in responses]
        for response, msgs in zip(responses, per_response, strict=True):
            assert len(response) <= RESPONSE_CAP or len(msgs) == 1
        assert [len(m.value) for m in messages(responses)] == [MB] * 3 + [5 * MB] + [MB] * 3
    finally:
        client.close()


def test_a_consume_over_the_clients_max_bytes_fails_and_moves_nothing(
    shared_server: Any, unique_topic: str
) -> None:
    """A client that takes at most 1.5 MB says so (``max_bytes``): it gets one 1 MB message
    per response, and a message over its limit fails the call without moving the cursor."""
    client = Raw(shared_server.address, max_receive=1_500_000)
    try:
        client.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic, config=BIG_CONFIG))
        client.publish_big(unique_topic, 3)
        with pytest.raises(grpc.RpcError) as info:
            client.consume(topic=unique_topic, subscription="s", max_bytes=900_000)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "900000" in (info.value.details() or "")
        got = []
        for _ in range(3):
            reply = client.consume(topic=unique_topic, subscription="s", max_bytes=1_500_000)
            assert len(reply) <= 1_500_000
            got += numbers(list(pb.ConsumeResponse.FromString(reply).messages))
        assert got == [0, 1, 2]  # the failed call skipped nothing
        read = client.read(pb.ReadRequest(topic=unique_topic, max_bytes=1_500_000))
        assert len(read) == 3 and numbers(messages(read)) == [0, 1, 2]
    finally:
        client.close()


def _corrupt_last_batch(data_dir: Path, topic: str) -> None:
    """Flip one byte in the last stored batch of a SEGMENTED topic (its last record)."""
    (log_file,) = sorted((data_dir / "segments" / topic).glob("*.log"))
    data = bytearray(log_file.read_bytes())
    data[-3] ^= 0xFF
    log_file.write_bytes(bytes(data))


def test_a_consume_that_hits_a_corrupt_batch_moves_nothing(
    server: Any, connect: Any, unique_topic: str
) -> None:
    """Batch A is sound, batch B corrupt: a Consume that would take both fails DATA_LOSS,
    and the next Consume still starts at A's first message."""
    stubs = connect(server.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic, kind=pb.SEGMENTED))
    stubs.publish(unique_topic, (b"a", b"1"), (b"b", b"2"), (b"c", b"3"))
    stubs.publish(unique_topic, (b"d", b"4"), (b"e", b"5"), (b"f", b"6"))
    _corrupt_last_batch(server.data_dir, unique_topic)

    req = pb.ConsumeRequest(topic=unique_topic, subscription="s", max_messages=10)
    with pytest.raises(grpc.RpcError) as info:
        stubs.log.Consume(req, timeout=30)
    assert info.value.code() == grpc.StatusCode.DATA_LOSS
    req.max_messages = 3
    got = stubs.log.Consume(req, timeout=30).messages
    assert [(m.id.entry_id, m.value) for m in got] == [(0, b"1"), (1, b"2"), (2, b"3")]
