"""Sending a topic's traffic straight to the process that owns it (``serve --shards N``).

A sharded server answers every call at its one address (its front routes it), but a
client that knows where a topic lives saves the hop: ``TopicAdmin.GetPartitionMap``
names the owner's address of each partition (CONTRACT section 9). ``Routes`` asks once
per topic, keeps one channel per owner address, and ``RoutedLog`` looks like a
``LogStub`` for one topic whose calls go to that owner. (``routing.py`` beside it is the
producer's partitioner; this module only decides which process a call goes to.)

When a topic has moved (the server restarted with another ``--shards``, a shard was
restarted on a new port) the old owner is gone (``UNAVAILABLE``) or answers
``NOT_OWNER``: a unary call then asks for the map again and is retried once at the new
owner. A Publish retried after a connection that broke mid-call may store its records
twice, as any at-least-once producer may. Streams (Read, PublishStream) go to the owner
known when they open. A server without shards answers the map with an empty address
("the address you asked"), and one older than the map answers ``UNIMPLEMENTED``: both
keep everything on the one channel.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc

from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

OpenChannel = Callable[[str], grpc.Channel]


def _moved(exc: grpc.RpcError) -> bool:
    """Whether a call failed because its owner is gone or is no longer the owner."""
    code = exc.code() if isinstance(exc, grpc.Call) else None
    return bool(code == grpc.StatusCode.UNAVAILABLE)


class Routes:
    """Topic -> the ``LogStub`` of its owner, learned from ``GetPartitionMap``."""

    def __init__(
        self,
        main: ClientLog,
        admin: pb_grpc.TopicAdminStub,
        open_channel: OpenChannel,
        timeout: float | None,
    ) -> None:
        self.main = main
        self.admin = admin
        self.open_channel = open_channel
        self.timeout = timeout
        self._owners: dict[str, ClientLog] = {}
        self._channels: dict[str, tuple[grpc.Channel, ClientLog]] = {}
        self._lock = threading.Lock()

    def owner(self, topic: str) -> ClientLog:
        """The stub that reaches ``topic``'s owner (the main channel when it is the one)."""
        stub = self._owners.get(topic)
        return stub if stub is not None else self._learn(topic)

    def forget(self, topic: str) -> None:
        self._owners.pop(topic, None)

    def addresses(self) -> list[str]:
        """Owner addresses this client holds a channel to (for tests and diagnostics)."""
        return sorted(self._channels)

    def _learn(self, topic: str) -> ClientLog:
        try:
            answer = self.admin.GetPartitionMap(
                pb.GetPartitionMapRequest(topic=topic), timeout=self.timeout
            )
        except grpc.RpcError as exc:
            if isinstance(exc, grpc.Call) and exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                self._owners[topic] = self.main  # a server without the map: one channel
            return self.main  # anything else: the main address answers (NOT_FOUND, ...)
        own = [e.address for e in answer.partitions if e.topic == topic]
        every = {e.address for e in answer.partitions}
        if own:
            stub = self._stub(own[0])
        elif len(every) == 1:  # a partitioned topic whose partitions share one owner
            stub = self._stub(every.pop())
        else:
            stub = self.main
        for entry in answer.partitions:  # a partitioned topic's partitions, learned at once
            self._owners[entry.topic] = self._stub(entry.address)
        self._owners[topic] = stub
        return stub

    def _stub(self, address: str) -> ClientLog:
        if not address:
            return self.main
        with self._lock:
            held = self._channels.get(address)
            if held is None:
                channel = self.open_channel(address)
                held = (channel, ClientLog(channel))
                self._channels[address] = held
            return held[1]

    def close(self) -> None:
        with self._lock:
            for channel, _stub in self._channels.values():
                channel.close()
            self._channels.clear()
            self._owners.clear()


class ClientLog(pb_grpc.LogStub):
    """The ``LogStub`` with ``PublishStreamEncoded``: PublishStream taking each request
    already encoded (``send_async`` writes its requests' bytes itself, ``send_batches``),
    handed to gRPC as they are."""

    PublishStreamEncoded: grpc.StreamStreamMultiCallable[bytes, pb.PublishResponse]

    def __init__(self, channel: grpc.Channel) -> None:
        super().__init__(channel)  # type: ignore[call-arg]  # typed as __new__ in the .pyi
        self.PublishStreamEncoded = channel.stream_stream(
            "/compactlog.v1.Log/PublishStream",
            request_serializer=None,
            response_deserializer=pb.PublishResponse.FromString,
        )


class RoutedLog:
    """A ``LogStub`` look-alike for one topic: unary calls go to the owner of the topic
    they name (``NAME`` or, from a producer, one of its partitions) and follow a move
    once; streams open at the owner."""

    def __init__(self, routes: Routes, topic: str) -> None:
        self._routes = routes
        self._topic = topic

    def _unary(self, name: str, request: Any, **kwargs: Any) -> Any:
        # The request's own topic: a producer of a partitioned NAME retargets a request
        # whose records land on one partition to NAME-partition-i, whose owner may be
        # another process than NAME's (partition placement spreads the partitions).
        topic = getattr(request, "topic", "") or self._topic
        stub = self._routes.owner(topic)
        try:
            return getattr(stub, name)(request, **kwargs)
        except grpc.RpcError as exc:
            if stub is self._routes.main or not _moved(exc):
                raise
        self._routes.forget(topic)
        return getattr(self._routes.owner(topic), name)(request, **kwargs)

    def Publish(self, request: pb.PublishRequest, **kwargs: Any) -> Any:
        return self._unary("Publish", request, **kwargs)

    def Consume(self, request: pb.ConsumeRequest, **kwargs: Any) -> Any:
        return self._unary("Consume", request, **kwargs)

    def Acknowledge(self, request: pb.AcknowledgeRequest, **kwargs: Any) -> Any:
        return self._unary("Acknowledge", request, **kwargs)

    def AcknowledgeList(self, request: pb.AcknowledgeListRequest, **kwargs: Any) -> Any:
        return self._unary("AcknowledgeList", request, **kwargs)

    def future(self, method: str, request: Any, **kwargs: Any) -> Any:
        """A unary call (Acknowledge, AcknowledgeList) sent now, at the owner known now: its
        ``grpc.Future`` (a failure is sent again through the method itself, which follows
        a move)."""
        stub = self._routes.owner(request.topic or self._topic)
        return getattr(stub, method).future(request, **kwargs)

    def NegativeAcknowledge(self, request: pb.NegativeAcknowledgeRequest, **kwargs: Any) -> Any:
        return self._unary("NegativeAcknowledge", request, **kwargs)

    def CloseConsumer(self, request: pb.CloseConsumerRequest, **kwargs: Any) -> Any:
        return self._unary("CloseConsumer", request, **kwargs)

    def GetLastMessageId(self, request: pb.GetLastMessageIdRequest, **kwargs: Any) -> Any:
        return self._unary("GetLastMessageId", request, **kwargs)

    def GetKeyHistory(self, request: pb.GetKeyHistoryRequest, **kwargs: Any) -> Any:
        return self._unary("GetKeyHistory", request, **kwargs)

    def Read(self, request: pb.ReadRequest, **kwargs: Any) -> Any:
        return self._routes.owner(self._topic).Read(request, **kwargs)

    def PublishStream(self, requests: Any, **kwargs: Any) -> Any:
        return self._routes.owner(self._topic).PublishStream(requests, **kwargs)

    def ConsumeStream(self, flows: Any, **kwargs: Any) -> Any:
        return self._routes.owner(self._topic).ConsumeStream(flows, **kwargs)

    def PublishStreamEncoded(self, requests: Any, **kwargs: Any) -> Any:
        return self._routes.owner(self._topic).PublishStreamEncoded(requests, **kwargs)
