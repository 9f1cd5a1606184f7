"""The subscription admin calls on a partitioned topic ``NAME`` end to end, on a single
store and on ``serve --shards 2`` with partition placement (the front asking every slot
holding a partition and merging: ``server/front/spread/subscriptions.py``). The same scenario runs
on both and must give the same answers: List sums every partition's subscription,
Delete and a reset to a time or position act on every partition having it, a reset to
a message id on the partition the id names only (Pulsar's rules)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import grpc
import pytest

from compactlog import cli
from compactlog.partitioner import partition_name
from compactlog.storage.slots import SLOT_COUNT, Placement, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess

NAME, PARTITIONS, EACH = "orders", 4, 3
PLACEMENT = '"shards.placement" = "partition"\n'


class Api:
    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def subs(self, topic: str) -> dict[str, pb.SubscriptionInfo]:
        listed = self.admin.ListSubscriptions(pb.ListSubscriptionsRequest(topic=topic), timeout=30)
        return {s.name: s for s in listed.subscriptions}

    def backlogs(self, subscription: str) -> list[int | None]:
        """Each partition's backlog of ``subscription`` (None: the partition lacks it)."""
        found = [self.subs(partition_name(NAME, i)).get(subscription) for i in range(PARTITIONS)]
        return [None if s is None else s.backlog for s in found]

    def reset(self, subscription: str, **target: object) -> pb.SubscriptionInfo:
        request = pb.ResetCursorRequest(topic=NAME, subscription=subscription, **target)  # type: ignore[arg-type]
        info: pb.SubscriptionInfo = self.admin.ResetCursor(request, timeout=30)
        return info

    def delete(self, subscription: str) -> None:
        request = pb.DeleteSubscriptionRequest(topic=NAME, subscription=subscription)
        self.admin.DeleteSubscription(request, timeout=30)


@pytest.fixture(params=["single", "spread"])
def api(
    request: pytest.FixtureRequest, server_factory: Callable[..., ServerProcess]
) -> Iterator[Api]:
    """``NAME`` of 4 partitions, EACH messages in each (published to ``NAME-partition-i``),
    on a single store or spread over 2 shards (4 slots: one partition each)."""
    if request.param == "spread":
        slots = {
            slot_of(partition_name(NAME, i), SLOT_COUNT, Placement.PARTITION) for i in range(4)
        }
        assert len(slots) == PARTITIONS
        srv = server_factory(config=PLACEMENT, extra_args=["--shards", "2"])
    else:
        srv = server_factory()
    made = Api(srv.address)
    made.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=PARTITIONS), timeout=30)
    for i in range(PARTITIONS):
        records = [pb.Record(key=b"k", value=b"p%d-%d" % (i, k)) for k in range(EACH)]
        request = pb.PublishRequest(topic=partition_name(NAME, i), records=records)
        made.log.Publish(request, timeout=30)
    yield made
    made.channel.close()


def failure(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def consume_all(api: Api) -> list[pb.Message]:
    """Every message of ``NAME`` through subscription ``s`` (made on every partition)."""
    got: list[pb.Message] = []
    for _ in range(20):
        request = pb.ConsumeRequest(topic=NAME, subscription="s", max_messages=100, wait_ms=100)
        got.extend(api.log.Consume(request, timeout=30).messages)
        if len(got) == PARTITIONS * EACH:
            return got
    raise AssertionError(f"consumed {len(got)} messages")


def acknowledge(api: Api, ids: list[pb.MessageId]) -> None:
    for msg_id in ids:
        ack = pb.AcknowledgeRequest(topic=NAME, subscription="s", id=msg_id)
        api.log.Acknowledge(ack, timeout=30)


def test_list_sums_every_partition_and_resets_follow_pulsar(api: Api) -> None:
    got = consume_all(api)
    ids = {(m.id.partition, m.value): m.id for m in got}
    acknowledge(api, [m.id for m in got if m.id.partition == 0])  # all of partition 0
    acknowledge(api, [ids[(1, b"p1-0")]])  # the first of partition 1
    alone = pb.ConsumeRequest(  # a subscription of partition 2 alone, SHARED
        topic=partition_name(NAME, 2), subscription="only2", subscription_type=pb.SHARED
    )
    api.log.Consume(alone, timeout=30)

    assert api.backlogs("s") == [0, 2, 3, 3]
    assert api.backlogs("only2") == [None, None, 3, None]
    listed = api.subs(NAME)
    assert list(listed) == ["only2", "s"]
    assert (listed["s"].type, listed["s"].backlog) == (pb.EXCLUSIVE, 8)
    assert (listed["only2"].type, listed["only2"].backlog) == (pb.SHARED, 3)
    assert not listed["s"].HasField("mark_delete")  # a position of one partition
    mark = api.subs(partition_name(NAME, 1))["s"].mark_delete
    assert (mark.partition, mark.entry_id) == (1, ids[(1, b"p1-0")].entry_id)

    second = ids[(2, b"p2-1")]  # a message id resets its partition only, inclusive
    answer = api.reset("s", message_id=second)
    assert api.backlogs("s") == [0, 2, 2, 3] and answer.backlog == 7
    assert answer.name == "s" and not answer.HasField("mark_delete")
    beyond = pb.MessageId(ledger_id=second.ledger_id, entry_id=0, partition=PARTITIONS)
    refused = failure(lambda: api.reset("s", message_id=beyond))
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    lacking = failure(lambda: api.reset("only2", message_id=ids[(0, b"p0-0")]))
    assert lacking.code() == grpc.StatusCode.NOT_FOUND  # partition 0 has no only2

    assert api.reset("s", timestamp_ms=0).backlog == PARTITIONS * EACH  # every partition
    assert api.backlogs("s") == [EACH] * PARTITIONS
    assert api.reset("only2", position=pb.LATEST).backlog == 0  # the one partition having it
    assert api.reset("s", position=pb.LATEST).backlog == 0
    assert api.backlogs("s") == [0] * PARTITIONS
    reserved = failure(lambda: api.reset("__compaction", position=pb.EARLIEST))
    assert reserved.code() == grpc.StatusCode.PERMISSION_DENIED


def test_delete_acts_on_every_partition_having_it(api: Api) -> None:
    consume_all(api)
    for subscription in ("only2", "busy"):  # partition 2 alone; partition 1 held by "a"
        part = 2 if subscription == "only2" else 1
        request = pb.ConsumeRequest(
            topic=partition_name(NAME, part), subscription=subscription, consumer_name="a"
        )
        api.log.Consume(request, timeout=30)

    api.delete("only2")
    api.delete("busy")  # a connected consumer does not stop it, as on one topic
    assert list(api.subs(NAME)) == ["s"]
    gone = failure(lambda: api.delete("only2"))
    assert gone.code() == grpc.StatusCode.NOT_FOUND and "only2" in (gone.details() or "")
    reserved = failure(lambda: api.delete("__compaction"))
    assert reserved.code() == grpc.StatusCode.PERMISSION_DENIED
    api.delete("s")
    assert api.subs(NAME) == {} and api.backlogs("s") == [None] * PARTITIONS
    missing = pb.ListSubscriptionsRequest(topic="no-such-topic")
    assert failure(lambda: api.admin.ListSubscriptions(missing)).code() == grpc.StatusCode.NOT_FOUND


def test_the_cli_on_a_partitioned_topic(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    got = consume_all(api)
    acknowledge(api, [m.id for m in got if m.id.partition == 3])

    def run(*argv: str) -> tuple[int, str]:
        code = cli.main(["--server", api.address, "subscriptions", *argv])
        return code, capsys.readouterr().out

    code, out = run("list", NAME, "--json")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {"name": "s", "type": "EXCLUSIVE", "mark_delete": None, "backlog": 9}
    ]
    code, out = run("list", partition_name(NAME, 3), "--json")
    mark = json.loads(out)["mark_delete"]
    assert code == 0 and mark.endswith(":3")  # LEDGER:ENTRY:PARTITION, as reset takes it
    ledger, _entry, _partition = mark.split(":")
    code, out = run("reset", NAME, "s", "--to", f"{ledger}:0:3")
    assert code == 0 and "backlog 12" in out  # partition 3 from its first message
    code, out = run("reset", NAME, "s", "--to", "latest")
    assert code == 0 and "backlog 0" in out
    code, out = run("delete", NAME, "s")
    assert code == 0 and "deleted" in out
    assert run("list", NAME) == (0, f"no subscriptions on {NAME}\n")


def test_close_consumer_on_the_name_releases_every_partition(api: Api) -> None:
    """An EXCLUSIVE consumer of each partition (as consumers of ``NAME-partition-i``
    are); one CloseConsumer on ``NAME`` frees them all at once, on every slot holding
    one, well inside the 30 s a silent consumer is kept."""

    def take(i: int, name: str) -> list[pb.Message]:
        request = pb.ConsumeRequest(
            topic=partition_name(NAME, i), subscription="ex", consumer_name=name
        )
        return list(api.log.Consume(request, timeout=30).messages)

    for i in range(PARTITIONS):
        assert len(take(i, "a")) == EACH
    busy = failure(lambda: take(0, "b"))
    assert busy.code() == grpc.StatusCode.FAILED_PRECONDITION
    closing = pb.CloseConsumerRequest(topic=NAME, subscription="ex", consumer_name="a")
    api.log.CloseConsumer(closing, timeout=30)
    for i in range(PARTITIONS):
        assert len(take(i, "b")) == EACH  # again from the mark-delete position
