"""A real ``compactlog serve`` under a low open-file limit (``prlimit --nofile``): it
refuses to start in one line when the limit cannot hold a server; above that it keeps
what it holds within its share (segment files, RocksDB tables, index files through one
LRU), refuses a new stream with FILE_LIMIT before the limit is reached, and everything
already open keeps working (CONTRACT section 11)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

from ..conftest import ServerProcess, Stubs

LIMIT = 128
RECORDS = [pb.Record(key=b"k%d" % i, value=b"v" * 300) for i in range(4)]


def limited(nofile: int) -> list[str]:
    if shutil.which("prlimit") is None:
        pytest.skip("needs prlimit (util-linux)")
    return ["prlimit", f"--nofile={nofile}", "--"]


class LimitedServer(ServerProcess):
    def command(self) -> list[str]:
        return [*limited(LIMIT), *super().command()]


@pytest.fixture
def limited_server(tmp_path: Path) -> Iterator[LimitedServer]:
    srv = LimitedServer(tmp_path / "data")
    srv.start()
    yield srv
    if srv.proc is not None and srv.proc.poll() is None:
        srv.kill()


def open_files(srv: ServerProcess) -> int:
    assert srv.proc is not None
    return len(os.listdir(f"/proc/{srv.proc.pid}/fd"))


def reason(err: grpc.RpcError) -> str:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None, f"{err.code()}: {err.details()}"
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return info.reason


def test_a_limit_too_low_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(tmp_path / "d")]
    done = subprocess.run(
        [*limited(32), *command, "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "open-file limit is 32" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_low_limit_is_shared_out_and_new_streams_get_file_limit(
    limited_server: LimitedServer, connect: Callable[[str], Stubs]
) -> None:
    api = connect(limited_server.address)
    topics = [f"s{i}" for i in range(40)] + [f"l{i}" for i in range(10)]
    config = {"segment.bytes": "2048", "cleanup.policy": "compact"}
    for name in topics:
        kind = pb.SEGMENTED if name.startswith("s") else pb.LEDGER
        api.admin.CreateTopic(
            pb.CreateTopicRequest(
                name=name, kind=kind, config=config if kind == pb.SEGMENTED else {}
            )
        )
    acked: dict[str, list[int]] = {name: [] for name in topics}
    for _ in range(4):  # several segments a topic, and an index entry in each
        for name in topics:
            reply = api.log.Publish(pb.PublishRequest(topic=name, records=RECORDS), timeout=30)
            acked[name] += [i.entry_id for i in reply.ids]
    assert open_files(limited_server) < LIMIT // 2  # the shares hold, whatever the topics

    channels: list[grpc.Channel] = []
    streams = []
    refused: set[str] = set()
    try:
        for i in range(LIMIT):  # a connection of its own each: a socket each on the server
            channel = grpc.insecure_channel(
                limited_server.address, options=[("grpc.use_local_subchannel_pool", 1)]
            )
            channels.append(channel)
            stream = pb_grpc.LogStub(channel).Read(
                pb.ReadRequest(topic=topics[i % len(topics)], position=pb.LATEST, follow=True),
                timeout=60,
            )
            stream.initial_metadata()  # a follow stream that started, or one refused at once
            if stream.done():
                refused.add(reason(stream))  # type: ignore[arg-type]
                break
            streams.append(stream)
        assert refused == {"FILE_LIMIT"}, refused  # refused with its reason, nothing else
        assert open_files(limited_server) < LIMIT
        for name in topics:  # what was stored is served, and writes go on
            request = pb.ReadRequest(topic=name, position=pb.EARLIEST)
            got = [m.id.entry_id for r in api.log.Read(request, timeout=30) for m in r.messages]
            if name.startswith("l"):
                assert got == acked[name]
            else:  # cleaned: each key's latest is there (the last publish's four)
                assert got[-len(RECORDS) :] == acked[name][-len(RECORDS) :]
            api.log.Publish(pb.PublishRequest(topic=name, records=RECORDS), timeout=30)
    finally:
        for stream in streams:
            stream.cancel()
        for channel in channels:
            channel.close()
    assert limited_server.stop() == 0
