"""A real ``compactlog serve`` without the capabilities that let root ignore file modes,
whose data dir loses its write permission mid-run: every refused write says
STORAGE_UNAVAILABLE with the path and errno, a failed DeleteTopic or CreateTopic changes
nothing a client can see, and once the permission is back everything works again without
a restart (CONTRACT section 11)."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import Stubs
from .conftest import UnprivilegedServer

RECORDS = [pb.Record(key=b"k%d" % i, value=b"v" * 200) for i in range(8)]


def refusal(call: Callable[[], object]) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    with pytest.raises(grpc.RpcError) as refused:
        call()
    err = refused.value
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None, err.details()
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return err.code(), info.reason, dict(info.metadata)


def offsets(api: Stubs, topic: str) -> list[int]:
    request = pb.ReadRequest(topic=topic, position=pb.EARLIEST)
    return [m.id.entry_id for r in api.log.Read(request, timeout=30) for m in r.messages]


@pytest.mark.slow
def test_lost_write_permission_refuses_with_its_reason_and_recovers(
    unprivileged: UnprivilegedServer, connect: Callable[[str], Stubs]
) -> None:
    api = connect(unprivileged.address)
    config = {"segment.bytes": "4096"}  # a roll every few publishes: a new file to create
    api.admin.CreateTopic(pb.CreateTopicRequest(name="s", kind=pb.SEGMENTED, config=config))
    acked = [i.entry_id for i in api.log.Publish(pb.PublishRequest(topic="s", records=RECORDS)).ids]
    segments = unprivileged.data_dir / "segments"
    (segments / "s").chmod(0o555)
    for _ in range(10):  # until a roll needs a new segment file
        try:
            reply = api.log.Publish(pb.PublishRequest(topic="s", records=RECORDS), timeout=30)
        except grpc.RpcError:
            break
        acked += [i.entry_id for i in reply.ids]
    else:
        raise AssertionError("no publish needed a new file")
    code, reason, metadata = refusal(
        lambda: api.log.Publish(pb.PublishRequest(topic="s", records=RECORDS), timeout=30)
    )
    assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "STORAGE_UNAVAILABLE")
    assert metadata["errno"] == "EACCES" and metadata["path"].startswith(str(segments / "s"))
    assert offsets(api, "s") == acked  # reads go on; nothing acknowledged is missing

    segments.chmod(0o555)  # no topic can come or go now
    code, reason, _ = refusal(
        lambda: api.admin.CreateTopic(pb.CreateTopicRequest(name="new", kind=pb.SEGMENTED))
    )
    assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "STORAGE_UNAVAILABLE")
    code, reason, _ = refusal(lambda: api.admin.DeleteTopic(pb.DeleteTopicRequest(name="s")))
    assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "STORAGE_UNAVAILABLE")
    names = [t.name for t in api.admin.ListTopics(pb.ListTopicsRequest()).topics]
    assert names == ["s"]  # the failed delete and create changed nothing
    assert offsets(api, "s") == acked

    segments.chmod(0o755)  # the permission is back: no restart needed
    (segments / "s").chmod(0o755)
    more = [i.entry_id for i in api.log.Publish(pb.PublishRequest(topic="s", records=RECORDS)).ids]
    assert more[0] == acked[-1] + 1
    api.admin.CreateTopic(pb.CreateTopicRequest(name="new", kind=pb.SEGMENTED))
    api.admin.DeleteTopic(pb.DeleteTopicRequest(name="new"))
    assert unprivileged.stop() == 0
    unprivileged.start()
    again = connect(unprivileged.address)
    assert offsets(again, "s") == [*acked, *more]
    assert [t.name for t in again.admin.ListTopics(pb.ListTopicsRequest()).topics] == ["s"]
