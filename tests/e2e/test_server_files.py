"""The server's own files under the segments root never collide with a topic: topics
named after them live beside them, through cleaning and restarts; files an older
server left at the root are moved into ``~server/``."""

from __future__ import annotations

import os
import shutil
from typing import Any

from compactlog.v1 import compactlog_pb2 as pb

OWN_NAMES = ("FORMAT", "cleaner-offset-checkpoint")


def create(stubs: Any, name: str) -> None:
    config = {"cleanup.policy": "compact", "segment.bytes": "200", "retention.ms": "-1"}
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=name, kind=pb.SEGMENTED, config=config))


def latest(stubs: Any, name: str) -> dict[bytes, bytes]:
    out = {}
    for resp in stubs.log.Read(pb.ReadRequest(topic=name), timeout=30):
        for m in resp.messages:
            out[m.key] = m.value
    return out


def fill(stubs: Any, name: str) -> None:
    for round_ in range(4):
        stubs.publish(name, *[(b"k%d" % i, b"v%d" % round_) for i in range(5)])


def test_topics_named_like_the_servers_files_clean_and_restart(server: Any, connect: Any) -> None:
    stubs = connect(server.address)
    for name in OWN_NAMES:
        create(stubs, name)
        fill(stubs, name)
        status = stubs.admin.Compact(pb.CompactRequest(topic=name, wait=True), timeout=60)
        assert status.state == pb.CompactionStatus.SUCCESS, status.last_error
        assert status.last_run.removed > 0
    own = server.data_dir / "segments" / "~server"
    assert sorted(os.listdir(own)) == sorted(OWN_NAMES)  # the checkpoint was written
    assert server.stop() == 0
    server.start()
    stubs = connect(server.address)
    for name in OWN_NAMES:
        assert latest(stubs, name) == {b"k%d" % i: b"v3" for i in range(5)}
        fill(stubs, name)
        status = stubs.admin.Compact(pb.CompactRequest(topic=name, wait=True), timeout=60)
        assert status.state == pb.CompactionStatus.SUCCESS, status.last_error


def test_files_of_an_older_server_at_the_root_are_moved(server: Any, connect: Any) -> None:
    stubs = connect(server.address)
    create(stubs, "t")
    fill(stubs, "t")
    stubs.admin.Compact(pb.CompactRequest(topic="t", wait=True), timeout=60)
    assert server.stop() == 0
    root = server.data_dir / "segments"
    for name in OWN_NAMES:  # the layout before ~server/
        os.replace(root / "~server" / name, root / name)
    shutil.rmtree(root / "~server")
    server.start()
    stubs = connect(server.address)
    assert sorted(os.listdir(root / "~server")) == sorted(OWN_NAMES)
    assert not any((root / name).exists() for name in OWN_NAMES)
    for name in OWN_NAMES:
        create(stubs, name)
        fill(stubs, name)
    assert latest(stubs, "t") == {b"k%d" % i: b"v3" for i in range(5)}
