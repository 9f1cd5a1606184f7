"""A slot's part of a call on a spread partitioned ``NAME`` failing, on a real
``serve --shards 2`` with partition placement: the front relays the slot's error, the
other slots answer where a single store would, and the server's stderr holds none of
asyncio's reports of a leaked task ("Task exception was never retrieved", a task
destroyed pending). asyncio reports those only when the task is collected, so this is
a smoke test; tests/server/front/test_tasks.py shows in process that the other parts
are cancelled and awaited (``server/front/tasks.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc

from compactlog.partitioner import partition_name
from compactlog.storage.partitioned_topics import FILE_NAME, load, save
from compactlog.storage.slots import SLOT_COUNT, Placement, slot_dir, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.e2e.shards import Api

NAME, PARTITIONS, EACH = "failing", 4, 300
PLACEMENT = '"shards.placement" = "partition"\n'
ASYNCIO_LEAKS = ("never retrieved", "destroyed but it is pending", "was never awaited")


def calls_on_name(api: Api) -> dict[str, Callable[[], object]]:
    """Calls the front fans out over NAME's slots (Log and TopicAdmin)."""
    log, admin = api.log, api.admin
    return {
        "Read": lambda: list(log.Read(pb.ReadRequest(topic=NAME), timeout=30)),
        "GetKeyHistory": lambda: log.GetKeyHistory(
            pb.GetKeyHistoryRequest(topic=NAME, key=b"k"), timeout=30
        ),
        "GetLastMessageId": lambda: log.GetLastMessageId(
            pb.GetLastMessageIdRequest(topic=NAME), timeout=30
        ),
        "Consume": lambda: log.Consume(
            pb.ConsumeRequest(topic=NAME, subscription="s", max_messages=5), timeout=30
        ),
        "GetTopic": lambda: admin.GetTopic(pb.GetTopicRequest(name=NAME), timeout=30),
        "GetCompactionStatus": lambda: admin.GetCompactionStatus(
            pb.GetCompactionStatusRequest(topic=NAME), timeout=30
        ),
        "ListSubscriptions": lambda: admin.ListSubscriptions(
            pb.ListSubscriptionsRequest(topic=NAME), timeout=30
        ),
        "AddPartitions": lambda: admin.AddPartitions(
            pb.AddPartitionsRequest(name=NAME, partitions=PARTITIONS + 2), timeout=30
        ),
    }


def forget_name(data_dir: Path, slot: int) -> None:
    """NAME's record removed from one slot's ``partitioned-topics.json`` (stopped server)."""
    record = slot_dir(data_dir, slot) / FILE_NAME
    held = load(record)
    assert NAME in held
    save(record, {name: topic for name, topic in held.items() if name != NAME})


def test_one_slots_part_failing_leaves_no_task_behind(
    server_factory: Callable[..., ServerProcess],
) -> None:
    srv = server_factory(config=PLACEMENT, extra_args=["--shards", "2"])
    api = Api(srv.address)
    api.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=PARTITIONS), timeout=30)
    for i in range(PARTITIONS):
        records = [pb.Record(key=b"k", value=b"v%d" % n) for n in range(EACH)]
        topic = partition_name(NAME, i)
        api.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)
    # A Read that stops early: the slots' streams still sending are cancelled.
    for limit in (1, 7, 50):
        request = pb.ReadRequest(topic=NAME, max_messages=limit)
        assert sum(len(r.messages) for r in api.log.Read(request, timeout=30)) == limit
    # NAME's record gone from partition 2's slot alone (as a crash mid-create may leave
    # it): that slot's part of each call fails (TOPIC_NOT_FOUND), the others answer.
    api.close()
    assert srv.stop() == 0
    forget_name(srv.data_dir, slot_of(partition_name(NAME, 2), SLOT_COUNT, Placement.PARTITION))
    srv.start()
    api = Api(srv.address)
    failed = {}
    for method, call in calls_on_name(api).items():
        try:
            call()
        except grpc.RpcError as exc:
            failed[method] = exc.code()
    # The calls needing every slot fail with that slot's error; the reads of records
    # skip a slot without NAME's (as after a crash mid-create); AddPartitions finds
    # partition 2 there already and says so.
    not_found = grpc.StatusCode.NOT_FOUND
    assert failed == {
        "Read": not_found,
        "GetKeyHistory": not_found,
        "GetLastMessageId": not_found,
        "Consume": not_found,
        "AddPartitions": grpc.StatusCode.ALREADY_EXISTS,
    }
    api.close()
    assert srv.stop() == 0
    leaks = [line for line in srv.stderr_lines if any(s in line for s in ASYNCIO_LEAKS)]
    assert leaks == []
