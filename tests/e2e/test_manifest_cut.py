"""A RocksDB MANIFEST cut short while the server is stopped, at every point: the server
either refuses to start in one line (and ``compactlog check`` names the problem) or
starts with every topic and every message; never with a topic silently gone
(CONTRACT section 11). Before the catalog, 21 of 52 cut points started "fine" without a
topic, and the read-write open then deleted its SST as obsolete."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import ServerProcess, Stubs

RECORDS = [pb.Record(key=b"k%d" % i, value=b"x" * 500) for i in range(20)]


def fill(api: Stubs, topic: str) -> None:
    api.admin.CreateTopic(pb.CreateTopicRequest(name=topic))
    for _ in range(10):
        api.log.Publish(pb.PublishRequest(topic=topic, records=RECORDS), timeout=30)


def content(api: Stubs) -> dict[str, int]:
    names = [t.name for t in api.admin.ListTopics(pb.ListTopicsRequest()).topics]
    return {
        name: sum(
            len(r.messages)
            for r in api.log.Read(pb.ReadRequest(topic=name, position=pb.EARLIEST), timeout=30)
        )
        for name in names
    }


@pytest.mark.slow
def test_a_cut_manifest_never_loses_a_topic_silently(
    tmp_path: Path,
    server_factory: Callable[..., ServerProcess],
    connect: Callable[[str], Stubs],
) -> None:
    srv = server_factory(data_dir=tmp_path / "made")
    fill(connect(srv.address), "a")
    assert srv.stop() == 0  # each stop flushes the memtable: one SST a round
    srv.start()
    fill(connect(srv.address), "b")
    assert srv.stop() == 0
    srv.start()
    fill(connect(srv.address), "c")
    expected = content(connect(srv.address))
    assert srv.stop() == 0
    (manifest,) = (srv.data_dir / "ledgers").glob("MANIFEST-*")
    size = manifest.stat().st_size
    outcomes = {"refused": 0, "whole": 0}
    for cut in range(16, size, 16):
        data_dir = tmp_path / f"cut-{cut}"
        shutil.copytree(srv.data_dir, data_dir)
        with open(data_dir / "ledgers" / manifest.name, "r+b") as fh:
            fh.truncate(cut)
        attempt = ServerProcess(data_dir)
        try:
            attempt.start()
        except RuntimeError as refused:  # the start failed: one line, nothing deleted
            lines = [ln for ln in str(refused).splitlines() if "compactlog: error" in ln]
            assert len(lines) == 1 and "Traceback" not in str(refused), str(refused)
            checked = subprocess.run(
                [sys.executable, "-m", "compactlog", "check", str(data_dir)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert checked.returncode != 0, checked.stdout
            outcomes["refused"] += 1
        else:
            try:
                assert content(connect(attempt.address)) == expected, f"cut at {cut} of {size}"
            finally:
                attempt.stop()
            outcomes["whole"] += 1
        shutil.rmtree(data_dir)
    print(f"\nMANIFEST cut at {sum(outcomes.values())} points of {size} bytes: {outcomes}")
    assert outcomes["refused"] > 0
