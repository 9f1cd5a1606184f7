"""What every asyncio stream object (consumer, producer, reader) needs of its client: the
``Link`` (stub, address, deadline, the call metadata carrying the token) and ``acall``,
one awaited unary call with its error translated as the sync client's ``errors.call``."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import grpc

from compactlog.client.aio.send_batches import PublishEncoded
from compactlog.client.errors import from_rpc_error
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

__all__ = ["Link", "Metadata", "acall"]

T = TypeVar("T")
Metadata = tuple[tuple[str, str], ...]


async def acall(method: str, address: str, call: Awaitable[T]) -> T:
    """Await one unary call with its ``RpcError`` translated, as ``errors.call`` does."""
    try:
        return await call
    except grpc.RpcError as err:
        raise from_rpc_error(err, method, address) from None


class Link:
    """What every stream object needs of its client: the Log stub (and its PublishStream
    taking requests' bytes), address, deadline and call metadata (the token)."""

    def __init__(
        self,
        stub: pb_grpc.LogAsyncStub,
        publish_encoded: PublishEncoded,
        address: str,
        timeout: float | None,
        metadata: Metadata,
    ) -> None:
        self.stub = stub
        self.publish_encoded = publish_encoded  # PublishStream of requests' bytes
        self.address = address
        self.timeout = timeout
        self.metadata = metadata
