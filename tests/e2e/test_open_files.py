"""CONTRACT section 12: the server holds a bounded number of open files, whatever the
segment count (``log.segment.open.files.max``, an LRU of descriptors).

``segment.bytes=14`` makes every publish roll a new segment. Before the LRU each segment
kept three descriptors (log, offset index, time index) for its whole life, so a few
hundred publishes exhausted the process's descriptors and the server, still listening,
accepted nothing. The tests count ``/proc/<pid>/fd`` of the real server process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from compactlog.v1 import compactlog_pb2 as pb

LIMIT = 16


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fill(server_factory: Any, connect: Any, publishes: int) -> None:
    srv = server_factory(config=f'"log.segment.open.files.max" = {LIMIT}\n')
    api = connect(srv.address)
    api.admin.CreateTopic(
        pb.CreateTopicRequest(name="tiny", kind=pb.SEGMENTED, config={"segment.bytes": "14"})
    )
    api.publish("tiny", (b"k", b"v0"))
    baseline = open_fds(srv.proc.pid)
    for i in range(1, publishes):
        api.publish("tiny", (b"k", b"v%d" % i))
    info = api.admin.GetTopic(pb.GetTopicRequest(name="tiny"))
    assert info.stats.segments >= publishes
    after_writes = open_fds(srv.proc.pid)
    got = [
        m.value for r in api.log.Read(pb.ReadRequest(topic="tiny"), timeout=60) for m in r.messages
    ]
    assert got == [b"v%d" % i for i in range(publishes)]
    after_reads = open_fds(srv.proc.pid)
    # the LRU's descriptors, plus a few that come and go (a pinned read, an index being written)
    assert after_writes <= baseline + LIMIT + 4, (baseline, after_writes)
    assert after_reads <= baseline + LIMIT + 4, (baseline, after_reads)
    with grpc.insecure_channel(srv.address) as fresh:  # still accepting connections
        health = health_pb2_grpc.HealthStub(fresh).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
    srv.stop()
    restarted = srv.start()  # start-up opens every segment: the LRU holds there too
    assert open_fds(restarted.proc.pid) <= baseline + LIMIT + 4
    again = connect(restarted.address)
    info = again.admin.GetTopic(pb.GetTopicRequest(name="tiny"))
    assert info.stats.entries == publishes


def test_open_files_stay_bounded_with_a_segment_per_publish(
    server_factory: Any, connect: Any
) -> None:
    fill(server_factory, connect, 120)


@pytest.mark.slow
def test_open_files_stay_bounded_over_thousands_of_segments(
    server_factory: Any, connect: Any, tmp_path: Path
) -> None:
    fill(server_factory, connect, 3000)
