"""A shard's Kafka broker making topic changes through the front (partition placement).

Under partition placement the partitions of one topic live in several store slots, and
only the front changes such a topic whole: it places a new topic's partitions, makes
every slot holding one agree, and repairs a change a crash cut half-way
(``server.front.spread``). So a broker does not create, grow, delete or reconfigure
topics in its own slots: it makes the front's TopicAdmin call, the very one a gRPC
client makes (CreateTopic, AddPartitions, DeleteTopic, UpdateTopicConfig), and the
front's answer, error reason included, is the broker's (``compactlog.rpc_errors``). A
``validate_only`` CreateTopics or CreatePartitions is the same call marked validate-only
(``server.admin.validation``): every slot the change touches checks it, none makes it.

The call goes to the front's listening address (loopback for an unspecified host),
with TLS trusting exactly the server's certificate under ``--tls-cert``, and carries the
front's per-run secret (``front.secret``) in place of a token: the front lets such a
call through its door and passes it on to the slots as its own, as the brokers let each
other's requests through (the client's roles were checked by the broker it reached).
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf.message import Message

from compactlog.rpc_errors import from_rpc_error
from compactlog.server.admin.validation import VALIDATE_ONLY
from compactlog.server.front.router import loopback_channel
from compactlog.server.front.secret import FRONT_KEY
from compactlog.v1 import compactlog_pb2 as pb

ADMIN = "/compactlog.v1.TopicAdmin/"
# Below the brokers' own ASK_TIMEOUT_S (kafka.peers), so that a broker that sent the
# request on hears this one's answer, not its own timeout.
CALL_TIMEOUT_S = 25.0


class FrontTopics:
    """``kafka.topics.FrontAdmin`` over gRPC to the front at ``address``."""

    def __init__(self, address: str, secret: str, tls_root: bytes | None) -> None:
        self.address = address
        self.metadata = ((FRONT_KEY, secret),)
        self.tls_root = tls_root
        self._channel: grpc.aio.Channel | None = None  # opened on the loop, at first use

    async def create(
        self, name: str, config: dict[str, str], partitions: int, validate_only: bool = False
    ) -> int:
        request = pb.CreateTopicRequest(
            name=name,
            kind=pb.SEGMENTED,
            config=config,
            partitions=partitions if partitions > 1 else 0,
        )
        answer = await self._call("CreateTopic", request, validate_only)
        return max(pb.TopicInfo.FromString(answer).partitions, 1)

    async def add_partitions(self, name: str, total: int, validate_only: bool = False) -> None:
        request = pb.AddPartitionsRequest(name=name, partitions=total)
        await self._call("AddPartitions", request, validate_only)

    async def delete(self, name: str) -> None:
        await self._call("DeleteTopic", pb.DeleteTopicRequest(name=name))

    async def update_config(self, name: str, set_: dict[str, str], remove: Sequence[str]) -> None:
        request = pb.UpdateTopicConfigRequest(name=name, set=set_, remove=list(remove))
        await self._call("UpdateTopicConfig", request)

    async def _call(self, method: str, request: Message, validate_only: bool = False) -> bytes:
        """The front's answer; its refusal raised as the ``compactlog.errors`` class it
        names. ``wait_for_ready``: a request in the moments before the front's port
        serves (the shards start first) waits for it. ``validate_only``: the change
        checked on every slot it touches, nothing made (``admin.validation``)."""
        if self._channel is None:
            self._channel = loopback_channel(self.address, self.tls_root)
        stub: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
        stub = self._channel.unary_unary(ADMIN + method)
        try:
            response: bytes = await stub(
                request.SerializeToString(),
                timeout=CALL_TIMEOUT_S,
                metadata=self.metadata + (VALIDATE_ONLY if validate_only else ()),
                wait_for_ready=True,
            )
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc, method, self.address) from None
        return response

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
