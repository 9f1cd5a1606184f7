"""A malformed publish is refused whole on a real server, of either kind: MALFORMED_REQUEST
(INVALID_ARGUMENT), nothing of it stored, and in a PublishStream nothing after it either.

The server checks a publish's bytes in the batch codec's one walk (``batch.publish_topic``)
instead of a protobuf parse; these requests are well-formed protobuf up to one text that
is not UTF-8, deep in a later record, where a partial write would show.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from compactlog.rpc_errors import error_info
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

KINDS = {"ledger": pb.LEDGER, "segmented": pb.SEGMENTED}
PUBLISH = "/compactlog.v1.Log/Publish"


def _good(topic: str, n: int) -> bytes:
    records = [pb.Record(key=b"k%d" % i, value=b"v", properties={"p": "q"}) for i in range(n)]
    return pb.PublishRequest(topic=topic, records=records).SerializeToString()


def _bad(topic: str) -> bytes:
    """Two good records, then one whose property value is not UTF-8."""
    entry = b"\x0a\x01p\x12\x02\xc3\x28"  # name "p", value: a lead byte without its tail
    record = b"\x0a\x01k\x1a" + bytes([len(entry)]) + entry
    return _good(topic, 2) + b"\x12" + bytes([len(record)]) + record


@pytest.fixture(scope="module")
def channel(module_server: object) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(module_server.address) as chan:  # type: ignore[attr-defined]
        yield chan


def _entries(channel: grpc.Channel, topic: str) -> int:
    info = pb_grpc.TopicAdminStub(channel).GetTopic(pb.GetTopicRequest(name=topic), timeout=10)
    return int(info.stats.entries)


def _refused(err: grpc.RpcError) -> None:
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err
    info = error_info(err)
    assert info is not None and info.reason == "MALFORMED_REQUEST", info
    assert "record 2: property value is not UTF-8" in (err.details() or "")


@pytest.fixture(params=list(KINDS))
def topic(request: pytest.FixtureRequest, channel: grpc.Channel, unique_topic: str) -> str:
    admin = pb_grpc.TopicAdminStub(channel)
    admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic, kind=KINDS[request.param]))
    return unique_topic


def test_a_malformed_publish_stores_nothing(channel: grpc.Channel, topic: str) -> None:
    publish = channel.unary_unary(PUBLISH, response_deserializer=pb.PublishResponse.FromString)
    with pytest.raises(grpc.RpcError) as err:
        publish(_bad(topic), timeout=10)
    _refused(err.value)
    assert _entries(channel, topic) == 0
    reply = publish(_good(topic, 1), timeout=10)
    assert [i.entry_id for i in reply.ids] == [0]  # nothing of the refused one took an id


def test_a_stream_stops_at_a_malformed_publish(channel: grpc.Channel, topic: str) -> None:
    stream = channel.stream_stream(
        "/compactlog.v1.Log/PublishStream", response_deserializer=pb.PublishResponse.FromString
    )
    replies = stream(iter([_good(topic, 3), _bad(topic), _good(topic, 4)]), timeout=10)
    first = next(replies)
    assert [i.entry_id for i in first.ids] == [0, 1, 2]
    with pytest.raises(grpc.RpcError) as err:
        next(replies)
    _refused(err.value)
    assert _entries(channel, topic) == 3
