"""With tokens on, the front still repairs a spread partitioned topic that a crash left
half-way (``server/front/spread/repair.py``): the repair's calls are the front's own, with
no caller's token, and a slot lets them through because they carry the front's mark
(``server/security/auth.py`` ``trusted``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from compactlog.storage.slots import SLOT_COUNT, Placement, slots_of_partitions
from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import ServerProcess
from ..e2e.shards import alive, shard_pids, wait_for
from ..e2e.test_spread_admin import NAME, records_on_disk
from .conftest import ADMIN, Stubs, spread_with_tokens, status_of

pytestmark = pytest.mark.slow


def test_an_add_partitions_cut_half_way_is_finished_with_tokens_on(
    server_factory: Callable[..., ServerProcess], tokens_file: Path
) -> None:
    srv, api = spread_with_tokens(server_factory, tokens_file, "after_home_add_partitions")
    api.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=2), timeout=30)
    pids = shard_pids(srv)
    grow = pb.AddPartitionsRequest(name=NAME, partitions=5)
    assert status_of(lambda: api.admin.AddPartitions(grow, timeout=30)) == (
        grpc.StatusCode.UNAVAILABLE
    )
    api.close()
    assert srv.wait(30) == 137
    wait_for(lambda: not any(alive(p) for p in pids), timeout=15)
    slots = slots_of_partitions(NAME, 5, SLOT_COUNT, Placement.PARTITION)
    assert records_on_disk(srv.data_dir) != dict.fromkeys(slots, 5)

    srv.start()
    wait_for(lambda: records_on_disk(srv.data_dir) == dict.fromkeys(slots, 5), timeout=20)
    api = Stubs(srv.address, ADMIN, None)
    records = [pb.Record(key=b"k-%d" % n, value=b"v") for n in range(40)]
    api.log.Publish(pb.PublishRequest(topic=NAME, records=records), timeout=30)
    read = [m for r in api.log.Read(pb.ReadRequest(topic=NAME), timeout=30) for m in r.messages]
    assert len(read) == 40 and {m.id.partition for m in read} == set(range(5))
    assert not any("not repaired yet" in line for line in srv.stderr_lines)
    api.close()
    srv.stop()
