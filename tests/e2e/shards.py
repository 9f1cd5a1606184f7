"""Helpers shared by the ``serve --shards N`` end-to-end tests (test_shards.py and the
spread ones): the shard processes of a server (from /proc), a free port, a thin typed
wrapper over the raw stubs, one message through the client's producer."""

from __future__ import annotations

import inspect
import socket
import time
from collections.abc import Callable

import grpc

from compactlog.bench.procstats import children
from compactlog.client import Client
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess

LEDGER, SEGMENTED = pb.LEDGER, pb.SEGMENTED


def shard_pids(srv: ServerProcess) -> list[int]:
    assert srv.proc is not None
    return [p for p in children(srv.proc.pid) if "compactlog.server.shards.process" in cmdline(p)]


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Api:
    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def create(self, name: str, kind: int = LEDGER) -> None:
        self.admin.CreateTopic(pb.CreateTopicRequest(name=name, kind=kind), timeout=30)

    def publish(self, topic: str, *values: bytes) -> list[int]:
        records = [pb.Record(key=v[:1], value=v) for v in values]
        resp = self.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)
        return [i.entry_id for i in resp.ids]

    def values(self, topic: str, compacted: bool = False) -> list[bytes]:
        req = pb.ReadRequest(topic=topic, read_compacted=compacted)
        return [m.value for r in self.log.Read(req, timeout=30) for m in r.messages]

    def close(self) -> None:
        self.channel.close()


def sharded(
    server_factory: Callable[..., ServerProcess], shards: int, **kw: object
) -> ServerProcess:
    return server_factory(extra_args=["--shards", str(shards)], **kw)


def produce(client: Client, topic: str, value: bytes) -> None:
    """One message through the client's producer (its ``send`` in main's or in
    pulsar-client's argument order)."""
    producer = getattr(client, "create_producer", None) or client.producer
    send = producer(topic).send
    if "partition_key" in inspect.signature(send).parameters:
        send(value)
    else:
        send(None, value)
