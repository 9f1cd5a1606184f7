"""Subscriptions on a real server (CONTRACT section 6, its safety parts): an ack of an id
the subscription was never given moves nothing, also across a restart; the server's own
``__`` subscriptions are closed to clients while the compactor keeps using its own."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from compactlog.rpc_errors import error_info
from compactlog.v1 import compactlog_pb2 as pb

S = grpc.StatusCode


def consume(stubs: Any, topic: str, **kw: Any) -> list[tuple[int, int]]:
    req = pb.ConsumeRequest(topic=topic, subscription="s", **kw)
    return [(m.id.ledger_id, m.id.entry_id) for m in stubs.log.Consume(req, timeout=30).messages]


def ack(stubs: Any, topic: str, msg_id: tuple[int, int], cumulative: bool = False) -> None:
    mid = pb.MessageId(ledger_id=msg_id[0], entry_id=msg_id[1])
    req = pb.AcknowledgeRequest(topic=topic, subscription="s", id=mid, cumulative=cumulative)
    stubs.log.Acknowledge(req, timeout=30)


def refused(stubs: Any, topic: str, msg_id: tuple[int, int], cumulative: bool = False) -> str:
    with pytest.raises(grpc.RpcError) as info:
        ack(stubs, topic, msg_id, cumulative)
    assert info.value.code() == S.FAILED_PRECONDITION
    found = error_info(info.value)
    assert found is not None
    return found.reason


@pytest.mark.parametrize("kind", [pb.LEDGER, pb.SEGMENTED])
def test_not_delivered_leaves_the_cursor_where_it_was_also_after_restart(
    server: Any, connect: Any, kind: int
) -> None:
    stubs = connect(server.address)
    config = {"ledger.max.entries": "2"} if kind == pb.LEDGER else {}
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name="t", kind=kind, config=config))  # type: ignore[arg-type]
    ids = stubs.publish("t", *[(b"k%d" % i, b"%d" % i) for i in range(5)])
    assert consume(stubs, "t", max_messages=3) == ids[:3]
    ack(stubs, "t", ids[1])  # individually
    assert refused(stubs, "t", ids[3]) == "NOT_DELIVERED"
    assert refused(stubs, "t", ids[4], cumulative=True) == "NOT_DELIVERED"
    ghost = (ids[0][0], 7) if kind == pb.LEDGER else (1, 0)  # within reach, no such message
    assert refused(stubs, "t", ghost, cumulative=True) == "NOT_DELIVERED"
    assert server.stop() == 0
    server.start()
    stubs = connect(server.address)
    ack(stubs, "t", ids[2])  # delivered before the restart: still counts
    assert refused(stubs, "t", ids[3]) == "NOT_DELIVERED"
    # every message not acked comes again, in order, and nothing skipped ahead
    assert consume(stubs, "t", redeliver_unacknowledged=True) == [ids[0], ids[3], ids[4]]
    ack(stubs, "t", ids[4], cumulative=True)  # delivered now: everything up to it
    assert consume(stubs, "t", redeliver_unacknowledged=True, wait_ms=50) == []


def test_the_servers_own_subscriptions_are_closed_to_clients_not_to_the_compactor(
    server: Any, connect: Any
) -> None:
    stubs = connect(server.address)
    stubs.admin.CreateTopic(
        pb.CreateTopicRequest(name="t", config={"compaction.threshold.bytes": "1000000000"})
    )  # the threshold holds the __compaction cursor from the start
    ids = stubs.publish("t", (b"a", b"1"), (b"a", b"2"), (b"b", b"3"))
    for sub in ("__compaction", "__other"):
        with pytest.raises(grpc.RpcError) as denied:
            stubs.log.Consume(pb.ConsumeRequest(topic="t", subscription=sub), timeout=30)
        assert denied.value.code() == S.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as also:
            stubs.log.Acknowledge(
                pb.AcknowledgeRequest(
                    topic="t",
                    subscription=sub,
                    id=pb.MessageId(ledger_id=ids[-1][0], entry_id=ids[-1][1]),
                    cumulative=True,
                ),
                timeout=30,
            )
        assert also.value.code() == S.PERMISSION_DENIED
        for err in (denied.value, also.value):
            info = error_info(err)
            assert info is not None and info.reason == "RESERVED_SUBSCRIPTION"
            assert dict(info.metadata) == {"topic": "t", "subscription": sub}
    status = stubs.admin.Compact(pb.CompactRequest(topic="t", wait=True), timeout=60)
    assert status.state == pb.CompactionStatus.SUCCESS
    assert (status.horizon.ledger_id, status.horizon.entry_id) == ids[-1]
    read = pb.ReadRequest(topic="t", read_compacted=True)
    values = [m.value for r in stubs.log.Read(read, timeout=30) for m in r.messages]
    assert values == [b"2", b"3"]
