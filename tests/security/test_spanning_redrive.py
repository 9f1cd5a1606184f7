"""With tokens on, the front still finishes a spanning publish a crash left open.

The redrive after a restart is the front's own call, with no caller's token: a slot
under partition placement lets a call with no token through only when it carries the
front's secret mark (``server/security/auth.py``, ``server/front/spanning.py``); a call with no
token and no mark is still refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from compactlog.partitioner import partition_for_key
from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import ServerProcess
from ..e2e.shards import alive, shard_pids, wait_for
from .conftest import ADMIN, Stubs, spread_with_tokens, status_of

pytestmark = pytest.mark.slow

PARTITIONS = 4
RECORDS = [pb.Record(key=b"k-%d" % k, value=b"v") for k in range(40)]


def keys_by_partition(api: Stubs) -> dict[int, list[bytes]]:
    out = {}
    for p in range(PARTITIONS):
        request = pb.ReadRequest(topic=f"prices-partition-{p}", position=pb.EARLIEST)
        out[p] = [m.key for r in api.log.Read(request, timeout=30) for m in r.messages]
    return out


def test_a_crash_left_publish_is_finished_with_tokens_on(
    server_factory: Callable[..., ServerProcess], tokens_file: Path
) -> None:
    srv, api = spread_with_tokens(server_factory, tokens_file, "after_first_part")
    create = pb.CreateTopicRequest(name="prices", kind=pb.LEDGER, partitions=PARTITIONS)
    api.admin.CreateTopic(create, timeout=30)
    pids = shard_pids(srv)
    publish = pb.PublishRequest(topic="prices", records=RECORDS)
    assert status_of(lambda: api.log.Publish(publish, timeout=30)) == grpc.StatusCode.UNAVAILABLE
    api.close()
    assert srv.wait(30) == 137
    wait_for(lambda: not any(alive(p) for p in pids), timeout=15)  # shards follow their front
    srv.start()
    api = Stubs(srv.address, ADMIN, None)
    want: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for record in RECORDS:
        want[partition_for_key(record.key, PARTITIONS)].append(record.key)
    deadline = time.monotonic() + 20
    while keys_by_partition(api) != want and time.monotonic() < deadline:
        time.sleep(0.2)
    assert keys_by_partition(api) == want
    # A shard's own port still wants a token from anyone but the front.
    (entry, *_rest) = api.admin.GetPartitionMap(
        pb.GetPartitionMapRequest(topic="prices"), timeout=30
    ).partitions
    anonymous = Stubs(entry.address, None, None)
    read = pb.ReadRequest(topic=entry.topic, position=pb.EARLIEST)
    assert status_of(lambda: list(anonymous.log.Read(read, timeout=10))) == (
        grpc.StatusCode.UNAUTHENTICATED
    )
    anonymous.close()
    api.close()
    srv.stop()
