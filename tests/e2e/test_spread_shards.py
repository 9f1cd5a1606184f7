"""``serve --shards N`` with ``shards.placement = "partition"``: the data dir it makes and
the shards it starts (real processes). The front's answers on a spread ``NAME`` are
tested where the front builds them; the slots' side is tests/server/shards/test_spread_slot.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from compactlog.server.front.secret import SECRET_ENV
from compactlog.storage.slots import Placement, read_layout
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess
from tests.e2e.shards import cmdline, shard_pids

SPREAD = '"shards.placement" = "partition"\n'


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as handle:
        pairs = handle.read().decode("utf-8", "replace").split("\0")
    return dict(p.split("=", 1) for p in pairs if "=" in p)


def test_partition_placement_makes_a_spread_data_dir_and_its_shards_start(
    server_factory: Callable[..., ServerProcess],
) -> None:
    srv = server_factory(config=SPREAD, extra_args=["--shards", "2"])
    assert (srv.data_dir / "PLACEMENT").read_text() == "partition\n"
    layout = read_layout(srv.data_dir)
    assert layout is not None and layout.placement is Placement.PARTITION
    pids = shard_pids(srv)
    assert len(pids) == 2
    secrets = {_environ(pid).get(SECRET_ENV) for pid in pids}
    assert len(secrets) == 1 and None not in secrets  # one secret, every shard has it
    (secret,) = secrets
    assert secret is not None and len(secret) == 32
    for pid in pids:
        line = cmdline(pid)
        assert "--placement partition" in line and secret not in line
    # Topics that are not partitioned are served through the front as ever.
    with grpc.insecure_channel(srv.address) as channel:
        admin, log = pb_grpc.TopicAdminStub(channel), pb_grpc.LogStub(channel)
        admin.CreateTopic(pb.CreateTopicRequest(name="plain", kind=pb.LEDGER), timeout=30)
        record = pb.Record(key=b"k", value=b"v")
        log.Publish(pb.PublishRequest(topic="plain", records=[record]), timeout=30)
        read = log.Read(pb.ReadRequest(topic="plain"), timeout=30)
        assert [m.value for r in read for m in r.messages] == [b"v"]
    assert srv.stop() == 0
    # An existing data dir keeps its placement, whatever the config says now.
    again = server_factory(extra_args=["--shards", "2"], data_dir=srv.data_dir)
    assert all("--placement partition" in cmdline(pid) for pid in shard_pids(again))
    assert again.stop() == 0


def test_a_bad_placement_fails_the_start_in_one_line(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    bad = server_factory(
        config='"shards.placement" = "spread"\n', extra_args=["--shards", "2"], start=False
    )
    with pytest.raises(RuntimeError):
        bad.start()
    lines = [line for line in bad.stderr_lines if "error" in line]
    assert len(lines) == 1 and "shards.placement" in lines[0] and "partition" in lines[0]
    assert not (bad.data_dir / "SLOTS").exists()
