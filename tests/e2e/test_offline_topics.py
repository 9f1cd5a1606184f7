"""A topic whose stored state fails validation at start-up is offline, alone (CONTRACT
section 11): listed and described with the reason, every other call on it DATA_LOSS,
the other topics served, and DeleteTopic lets the operator give up on it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb


def test_a_topic_with_a_damaged_cursor_file_goes_offline_alone(
    server_factory: Any, connect: Any
) -> None:
    srv = server_factory()
    api = connect(srv.address)
    for name in ("bad", "good"):
        api.admin.CreateTopic(pb.CreateTopicRequest(name=name, kind=pb.SEGMENTED))
        api.publish(name, (b"k", b"v"))
        api.log.Consume(pb.ConsumeRequest(topic=name, subscription="s", max_messages=1))
    assert srv.stop() == 0
    cursors = srv.data_dir / "segments" / "bad" / "cursors.json"
    data = bytearray(cursors.read_bytes())
    data[2] ^= 0x01
    cursors.write_bytes(bytes(data))
    srv.start()
    api = connect(srv.address)
    listed = {t.name: t for t in api.admin.ListTopics(pb.ListTopicsRequest()).topics}
    assert set(listed) == {"bad", "good"}
    assert listed["bad"].offline and "cursors.json" in listed["bad"].offline_reason
    assert not listed["good"].offline and listed["good"].stats.entries == 1
    for call in (
        lambda: list(api.log.Read(pb.ReadRequest(topic="bad"))),
        lambda: api.publish("bad", (b"k", b"v2")),
        lambda: api.log.Consume(pb.ConsumeRequest(topic="bad", subscription="s")),
    ):
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.code() == grpc.StatusCode.DATA_LOSS
        assert "offline" in (info.value.details() or "")
    assert len(list(api.log.Read(pb.ReadRequest(topic="good")))) == 1
    described = subprocess.run(
        [sys.executable, "-m", "compactlog", "--server", srv.address, "topics", "describe", "bad"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.returncode == 0 and "OFFLINE:" in described.stdout
    assert srv.logged("is offline")  # and in the log
    api.admin.DeleteTopic(pb.DeleteTopicRequest(name="bad"))
    api.admin.CreateTopic(pb.CreateTopicRequest(name="bad", kind=pb.SEGMENTED))
    assert not api.admin.GetTopic(pb.GetTopicRequest(name="bad")).offline
