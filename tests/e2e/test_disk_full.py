"""A real ``compactlog serve`` whose data dir is on a disk that fills up (a small tmpfs):
what was acknowledged is stored, nothing partial is visible, every refusal says DISK_FULL
with the path, and the server serves again once space is back, without a restart
(CONTRACT section 11)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import ServerProcess, SmallDisk, Stubs

VALUE = b"v" * 4000
BATCH = [pb.Record(key=b"k%d" % i, value=VALUE) for i in range(16)]  # about 64 KB


def reason(err: grpc.RpcError) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None, err.details()
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return err.code(), info.reason, dict(info.metadata)


def publish_until_full(api: Stubs, topic: str) -> tuple[list[int], grpc.RpcError]:
    acked: list[int] = []
    for _ in range(2_000):
        try:
            reply = api.log.Publish(pb.PublishRequest(topic=topic, records=BATCH), timeout=30)
        except grpc.RpcError as err:
            return acked, err
        acked += [i.entry_id for i in reply.ids]
    raise AssertionError("the disk never filled")


def publish_once_space_is_back(api: Stubs, topic: str) -> list[int]:
    """Publish as a client retries a retriable refusal: DISK_FULL until the server has
    seen that space is back (it probes at most twice a second), then it is stored."""
    deadline = time.monotonic() + 10
    while True:
        try:
            reply = api.log.Publish(pb.PublishRequest(topic=topic, records=BATCH), timeout=30)
            return [i.entry_id for i in reply.ids]
        except grpc.RpcError as err:
            if reason(err)[1] != "DISK_FULL" or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def read_all(api: Stubs, topic: str) -> list[int]:
    request = pb.ReadRequest(topic=topic, position=pb.EARLIEST)
    return [m.id.entry_id for r in api.log.Read(request, timeout=60) for m in r.messages]


def check_data_dir(srv: ServerProcess) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "compactlog", "check", str(srv.data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )


KINDS = {  # the topic, and a disk with room for the server's own files besides the data
    "segmented": (pb.SEGMENTED, {"segment.bytes": "1048576"}, 24 << 20),
    "ledger": (pb.LEDGER, {}, 48 << 20),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_full_disk_loses_nothing_and_recovers_without_restart(
    kind: str,
    small_disk: Callable[[int], SmallDisk],
    server_factory: Callable[..., ServerProcess],
    connect: Callable[[str], Stubs],
) -> None:
    topic_kind, config, size = KINDS[kind]
    disk = small_disk(size)
    srv = server_factory(data_dir=disk.path / "data")
    api = connect(srv.address)
    api.admin.CreateTopic(
        pb.CreateTopicRequest(name="t", kind=topic_kind, config=config), timeout=30
    )
    disk.fill(leave=3 << 20)
    acked, full = publish_until_full(api, "t")
    code, why, metadata = reason(full)
    assert (code, why) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "DISK_FULL"), full.details()
    assert metadata["path"].startswith(str(disk.path)), metadata
    assert read_all(api, "t") == acked  # nothing partial, nothing acknowledged missing

    disk.free()
    more = publish_once_space_is_back(api, "t")
    assert more[0] == acked[-1] + 1
    assert read_all(api, "t") == [*acked, *more]

    assert srv.stop() == 0
    checked = check_data_dir(srv)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    srv.start()
    assert read_all(connect(srv.address), "t") == [*acked, *more]
