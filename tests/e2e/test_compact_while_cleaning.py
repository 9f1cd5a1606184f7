"""An explicit Compact of a SEGMENTED topic while the background cleaner is in a pass of
it answers COMPACTION_RUNNING (ALREADY_EXISTS), as a second Compact does, instead of
starting a run that ends in an ERROR state ("cleaning of t is InProgress")."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import ServerProcess, Stubs

SLOW_CLEANER = """
"log.cleaner.io.max.bytes.per.second" = 30000
"log.cleaner.backoff.ms" = 50
"""


@pytest.mark.slow
def test_compact_during_a_background_pass_is_compaction_running(
    server_factory: Callable[..., ServerProcess], connect: Callable[[str], Stubs]
) -> None:
    srv = server_factory(config=SLOW_CLEANER)
    api = connect(srv.address)
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",
    }
    api.admin.CreateTopic(pb.CreateTopicRequest(name="t", kind=pb.SEGMENTED, config=config))
    records = [pb.Record(key=b"k%d" % (i % 5), value=b"v" * 400) for i in range(40)]
    for _ in range(10):  # about 160 kB: a throttled background pass takes seconds
        api.log.Publish(pb.PublishRequest(topic="t", records=records), timeout=30)
    outcomes: list[Any] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            status = api.admin.Compact(pb.CompactRequest(topic="t", wait=True), timeout=60)
        except grpc.RpcError as err:
            outcomes.append(err.code())
            break
        outcomes.append(pb.CompactionStatus.State.Name(status.state))
        assert status.state != pb.CompactionStatus.ERROR, status.last_error
        # the explicit pass came first and cleaned it all: dirty it again, so that the
        # background cleaner (50 ms backoff) takes the log before the next Compact
        api.log.Publish(pb.PublishRequest(topic="t", records=records), timeout=30)
    assert outcomes[-1] == grpc.StatusCode.ALREADY_EXISTS, outcomes
