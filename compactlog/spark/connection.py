"""How the data source reaches the server, and the few calls it makes there.

``Connection`` is the channel factory: the address and a ``ChannelSecurity`` (the bearer
token, and the CA certificates read from the ``tlsCa`` file once on the driver, so
executors that cannot see the file still trust the server). It is a small frozen value
that pickles with readers and writers; each ``read()``/``write()`` opens its own channel
from it through ``compactlog.channels`` (the one way every caller reaches a server with
``--auth-tokens`` and TLS), because channels do not survive pickling and Spark runs
partitions in separate Python workers.

``ServerCalls`` is one channel's worth of the calls the source needs, every
``grpc.RpcError`` turned into a ``compactlog.errors`` class: GetTopic, Read and Publish
(what a ``reader`` — and, to write, a ``client`` — token may call), and the topic's
ledger layout (admin only), used just to choose where to split big ranges.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType

import grpc

from compactlog.channels import ChannelSecurity, open_channel
from compactlog.errors import CompactlogError, InvalidArgument, TopicNotFound
from compactlog.records import MessageId
from compactlog.rpc_errors import cancel, translate_errors
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

CHANNEL_OPTIONS = [
    # Read responses are bounded by the server (4 MiB, or one message up to its limit).
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]
UNARY_TIMEOUT_S = 60.0
READ_METHOD = "/compactlog.v1.Log/Read"
# Codes under which the layout is simply not ours to see (a reader's token): the plan
# then does without split points.
_NOT_PERMITTED = ("PERMISSION_DENIED", "UNAUTHENTICATED", "UNIMPLEMENTED")


@dataclass(frozen=True)
class Connection:
    """A server address with the token and CA certificates to reach it."""

    server: str
    security: ChannelSecurity = field(default_factory=ChannelSecurity)

    @classmethod
    def of(cls, server: str, token: str | None, tls_ca: str | None) -> Connection:
        """From the options; ``InvalidArgument`` naming the CA file if it is unusable."""
        try:
            return cls(server, ChannelSecurity.of(token, tls_ca))
        except InvalidArgument as exc:
            raise InvalidArgument(f"option 'tlsCa': {exc}") from None

    def open(self) -> grpc.Channel:
        return open_channel(self.server, self.security, CHANNEL_OPTIONS)

    def calls(self) -> ServerCalls:
        return ServerCalls(self)


class ServerCalls:
    """One channel and the calls of the data source; a context manager that closes it."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._channel = conn.open()
        self._log = pb_grpc.LogStub(self._channel)
        self._admin = pb_grpc.TopicAdminStub(self._channel)
        self._engine = pb_grpc.CompactionEngineStub(self._channel)
        # Read's responses stay bytes: no deserializer, no Message object per message.
        self._read: grpc.UnaryStreamMultiCallable[pb.ReadRequest, bytes] = (
            self._channel.unary_stream(
                READ_METHOD, request_serializer=pb.ReadRequest.SerializeToString
            )
        )

    def __enter__(self) -> ServerCalls:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def topic(self, name: str) -> pb.TopicInfo:
        """The topic's info; ``TopicNotFound`` naming it and the server if there is none."""
        try:
            with translate_errors("GetTopic", self.conn.server):
                info: pb.TopicInfo = self._admin.GetTopic(
                    pb.GetTopicRequest(name=name),
                    timeout=UNARY_TIMEOUT_S,
                )
                return info
        except TopicNotFound:
            raise TopicNotFound(
                f"topic {name!r} does not exist on compactlog server {self.conn.server}"
            ) from None

    def ledger_ranges(self, log: str) -> list[pb.LedgerRange] | None:
        """The raw ledgers of a LEDGER topic (id, first and last entry), or None where
        this token may not see the layout (it only guides splitting)."""
        try:
            with translate_errors("GetTopicLayout", self.conn.server):
                layout: pb.TopicLayout = self._engine.GetTopicLayout(
                    pb.GetTopicLayoutRequest(topic=log),
                    timeout=UNARY_TIMEOUT_S,
                )
        except CompactlogError as exc:
            if exc.code in _NOT_PERMITTED:
                return None
            raise
        return list(layout.raw_view)

    def read(self, log: str, start: MessageId, compacted: bool, limit: int) -> Iterator[bytes]:
        """The serialized ``ReadResponse``s of ``log`` from ``start``, raw or compacted
        view, unparsed (the column builder reads the bytes). ``limit`` (0: none) caps the
        stream where the range's size is known; the caller stops where the range ends,
        and the stream is cancelled when it does."""
        req = pb.ReadRequest(topic=log, read_compacted=compacted, max_messages=limit)
        req.message_id.ledger_id, req.message_id.entry_id = start
        with translate_errors("Read", self.conn.server):
            stream = self._read(req)
            try:
                yield from stream
            finally:
                cancel(stream)

    def publish(self, topic: str, records: Sequence[pb.Record]) -> None:
        """One Publish: all records or none (the server's rule)."""
        req = pb.PublishRequest(topic=topic, records=records)
        with translate_errors("Publish", self.conn.server):
            self._log.Publish(req, timeout=UNARY_TIMEOUT_S)
