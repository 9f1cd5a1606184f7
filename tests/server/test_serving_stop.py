"""A served store's stop ends every thread pool it owns: the Log service's and the
synchronous handlers' (``rpc``), so nothing of a stopped server waits for collection."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import grpc

from compactlog.server.broker import Broker
from compactlog.server.security.guard import Guard
from compactlog.server.serving import ServedStore
from compactlog.storage.config import ServerSettings
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


async def _serve_one_admin_call(served: ServedStore) -> list[threading.Thread]:
    """Serve, answer one synchronous call, stop; the ``rpc`` threads that answered it."""
    before = set(threading.enumerate())
    port = served.bind("127.0.0.1:0")
    await served.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        admin = pb_grpc.TopicAdminStub(channel)
        await admin.CreateTopic(pb.CreateTopicRequest(name="t", kind=pb.SEGMENTED))
    rpc = [t for t in threading.enumerate() if t not in before and t.name.startswith("rpc_")]
    await served.stop()
    return rpc


def test_stop_ends_the_rpc_pool(tmp_path: Path) -> None:
    settings = ServerSettings(topic_defaults={})
    served = ServedStore(Broker(tmp_path, settings), settings, Guard.plain())
    rpc = asyncio.run(_serve_one_admin_call(served))
    assert rpc, "the admin call ran on the rpc pool"
    # ended by stop itself: the store is still referenced, so nothing was collected
    assert [t.name for t in rpc if t.is_alive()] == []
    assert served.broker is not None
