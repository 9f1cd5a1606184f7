"""A partition-set change whose file operation fails half-way, on a real server without
root's file-mode capabilities: a create or a grow is undone (no partition of it left,
the old count kept), a delete is decided and finished by the next DeleteTopic, its
partitions not yet deleted refusing publishes and readers (NOT_FOUND, "being deleted")
meanwhile, local and under partition placement; every refusal says STORAGE_UNAVAILABLE,
and once the cause is gone the same call succeeds.

The failure is real and lands on one chosen partition: a directory the server cannot
empty sits where that partition's create stages it (``NAME~new``) or its delete moves
it (``NAME~del``), so the partitions before it are made or deleted and it is refused.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from compactlog.partitioner import partition_name
from compactlog.storage.partitioned_topics import read
from compactlog.storage.slots import SLOT_COUNT, Placement, slot_dir, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from tests.e2e.conftest import UnprivilegedServer, unprivileged_server
from tests.e2e.shards import SEGMENTED, Api
from tests.e2e.test_admin_crashes import count_of, listed, values, whole

pytestmark = pytest.mark.slow


def refused(call: object) -> str:
    """The reason of the refusal ``call()`` gets (its ErrorInfo's)."""
    with pytest.raises(grpc.RpcError) as failed:
        call()  # type: ignore[operator]
    metadata = dict(failed.value.trailing_metadata() or ())  # type: ignore[attr-defined]
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE, failed.value  # type: ignore[attr-defined]
    assert "grpc-status-details-bin" in metadata
    return str(failed.value.details())  # type: ignore[attr-defined]


class Blocker:
    """A directory at ``segments/<name>`` the server can neither empty nor replace."""

    def __init__(self, segments: Path, name: str) -> None:
        self.top = segments / name
        stuck = self.top / "stuck"
        stuck.mkdir(parents=True)
        (stuck / "file").write_bytes(b"x")
        stuck.chmod(0o555)

    def remove(self) -> None:
        (self.top / "stuck").chmod(0o755)
        shutil.rmtree(self.top)


@pytest.fixture
def api(unprivileged: UnprivilegedServer) -> Iterator[Api]:
    stubs = Api(unprivileged.address)
    yield stubs
    stubs.close()


def pending(srv: UnprivilegedServer, store: Path | None = None) -> dict[str, object]:
    return dict(read((store or srv.data_dir) / "partitioned-topics.json")[1])


def being_deleted(api: Api, part: str) -> None:
    """A partition of a delete refused half-way takes no publish, reader or consumer, and
    neither GetTopic nor ListTopics shows it: NOT_FOUND, saying why (never a read of what
    is left as if it were whole)."""
    assert part not in listed(api, part)
    calls = {
        "describe": lambda: api.admin.GetTopic(pb.GetTopicRequest(name=part), timeout=30),
        "publish": lambda: api.publish(part, b"late"),
        "read": lambda: api.values(part),
        "consume": lambda: api.log.Consume(
            pb.ConsumeRequest(topic=part, subscription="s", max_messages=10), timeout=30
        ),
    }
    for what, call in calls.items():
        with pytest.raises(grpc.RpcError) as refused_:
            call()
        error = refused_.value
        assert error.code() == grpc.StatusCode.NOT_FOUND, (what, error)  # type: ignore[attr-defined]
        assert "is being deleted" in str(error.details()), (what, error)  # type: ignore[attr-defined]


def test_a_grow_and_a_create_failing_half_way_are_undone(
    unprivileged: UnprivilegedServer, api: Api
) -> None:
    segments = unprivileged.data_dir / "segments"
    api.admin.CreateTopic(pb.CreateTopicRequest(name="q", kind=SEGMENTED, partitions=2))
    api.publish(partition_name("q", 1), b"kept")
    blocker = Blocker(segments, partition_name("q", 3) + "~new")
    grow = pb.AddPartitionsRequest(name="q", partitions=5)
    assert "creating topic q-partition-3" in refused(lambda: api.admin.AddPartitions(grow))
    assert whole(api, "q", 2) and values(api, "q") == [b"kept"]  # q-partition-2 undone
    assert pending(unprivileged) == {}

    create = pb.CreateTopicRequest(name="r", kind=SEGMENTED, partitions=4)
    stuck = Blocker(segments, partition_name("r", 2) + "~new")
    refused(lambda: api.admin.CreateTopic(create))
    assert count_of(api, "r") == 0 and listed(api, "r") == set()
    assert pending(unprivileged) == {}

    blocker.remove()
    stuck.remove()
    assert api.admin.AddPartitions(grow).partitions == 5
    api.admin.CreateTopic(create)
    assert whole(api, "q", 5) and whole(api, "r", 4)
    assert values(api, "q") == [b"kept"]


def test_a_delete_failing_half_way_is_finished_by_the_next_one(
    unprivileged: UnprivilegedServer, api: Api
) -> None:
    segments = unprivileged.data_dir / "segments"
    api.admin.CreateTopic(pb.CreateTopicRequest(name="q", kind=SEGMENTED, partitions=5))
    blocker = Blocker(segments, partition_name("q", 3) + "~del")
    delete = pb.DeleteTopicRequest(name="q")
    assert "deleting topic q-partition-3" in refused(lambda: api.admin.DeleteTopic(delete))
    assert count_of(api, "q") == 0 and listed(api, "q") == set()  # decided: all gone
    assert list(pending(unprivileged)) == ["q"]
    for i in (3, 4):  # not deleted yet
        being_deleted(api, partition_name("q", i))
    refused(lambda: api.admin.DeleteTopic(delete))  # still blocked: still refused

    blocker.remove()
    api.admin.DeleteTopic(delete)  # finishes the first one: answered OK
    assert listed(api, "q") == set() and pending(unprivileged) == {}
    api.admin.CreateTopic(pb.CreateTopicRequest(name="q", kind=SEGMENTED, partitions=2))
    assert whole(api, "q", 2) and values(api, "q") == []


@pytest.fixture
def spread(tmp_path: Path) -> Iterator[UnprivilegedServer]:
    config = tmp_path / "spread.toml"
    config.write_text('"shards.placement" = "partition"\n')
    yield from unprivileged_server(tmp_path, config, ["--shards", "2"])


def test_a_spread_delete_refused_at_home_half_way_is_decided_everywhere(
    spread: UnprivilegedServer,
) -> None:
    """Partition placement, 9 partitions over 8 slots: the home slot holds partitions 0
    and 8, and its delete is refused at 8. The front deletes the other slots' partitions
    as well (the home has decided), then answers the refusal; partition 8 refuses
    publishes and readers until the next DeleteTopic finishes the delete."""
    api = Api(spread.address)
    home = slot_dir(spread.data_dir, slot_of("q", SLOT_COUNT, Placement.PARTITION))
    api.admin.CreateTopic(pb.CreateTopicRequest(name="q", kind=SEGMENTED, partitions=9))
    for i in range(9):
        api.publish(partition_name("q", i), b"v%d" % i)
    blocker = Blocker(home / "segments", partition_name("q", 8) + "~del")
    delete = pb.DeleteTopicRequest(name="q")
    assert "deleting topic q-partition-8" in refused(lambda: api.admin.DeleteTopic(delete))
    assert count_of(api, "q") == 0 and listed(api, "q") == set()  # partition 8 hidden
    assert list(pending(spread, home)) == ["q"]
    being_deleted(api, partition_name("q", 8))

    blocker.remove()
    api.admin.DeleteTopic(delete)  # finishes it: answered OK
    assert listed(api, "q") == set() and pending(spread, home) == {}
    api.admin.CreateTopic(pb.CreateTopicRequest(name="q", kind=SEGMENTED, partitions=2))
    assert whole(api, "q", 2) and values(api, "q") == []
    api.close()
