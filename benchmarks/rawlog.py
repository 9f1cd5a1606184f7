"""The data plane of ``compactlog.v1.Log`` with bytes in and bytes out, for ``dataplane``.

The stubs here neither serialize requests nor parse responses: the benchmark builds each
request's bytes once, and the same bytes go through the same client code to the real
server and to the bare gRPC floor (``dataplane_floor``), which answers the same method
paths. What the client does with a response (parse it, count its messages) is then done
identically on both sides, so the two figures differ only by what the server does.

Frames files (``write_frames`` / ``read_frames``) hold a captured stream of serialized
responses, 4-byte big-endian length then the bytes, so the floor can replay exactly what
the real server sent.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import grpc

from compactlog.v1 import compactlog_pb2 as pb

PUBLISH = "/compactlog.v1.Log/Publish"
PUBLISH_STREAM = "/compactlog.v1.Log/PublishStream"
READ = "/compactlog.v1.Log/Read"
MAX_MESSAGE = 64 << 20  # above the contract's 4 MiB Read responses and 1 MiB records
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    ("grpc.max_send_message_length", MAX_MESSAGE),
]
FRAME = struct.Struct(">I")

Sink = Callable[[bytes], Any]
"""Where the read loop puts each raw response (a list's append, a ``FrameWriter``)."""


@dataclass(frozen=True)
class ReadFigures:
    """One timed read: seconds, responses received and messages they held."""

    seconds: float
    responses: int
    messages: int


class RawLog:
    """Raw-bytes ``Publish``, ``PublishStream`` and ``Read`` over one channel."""

    def __init__(self, address: str, timeout: float = 600.0) -> None:
        self.timeout = timeout
        self.channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        # No serializer, no deserializer: gRPC passes bytes through untouched.
        self._publish: grpc.UnaryUnaryMultiCallable[bytes, bytes] = self.channel.unary_unary(
            PUBLISH
        )
        self._stream: grpc.StreamStreamMultiCallable[bytes, bytes] = self.channel.stream_stream(
            PUBLISH_STREAM
        )
        self._read: grpc.UnaryStreamMultiCallable[bytes, bytes] = self.channel.unary_stream(READ)

    def __enter__(self) -> RawLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.channel.close()

    def publish_stream(self, requests: Iterable[bytes]) -> tuple[float, list[bytes]]:
        """Seconds to send every request on one stream and receive every reply.

        Pipelined as a producer is: gRPC's sending thread takes the next request as soon
        as the previous one is written (HTTP/2 flow control the only brake), while this
        thread takes the in-order replies as they come.
        """
        started = time.perf_counter()
        replies = list(self._stream(iter(requests), timeout=self.timeout))
        return time.perf_counter() - started, replies

    def unary_ms(self, request: bytes, count: int, warmup: int) -> list[float]:
        """Round trips of ``count`` unary calls, one after the other, after ``warmup``."""
        for _ in range(warmup):
            self._publish(request, timeout=self.timeout)
        out: list[float] = []
        for _ in range(count):
            started = time.perf_counter()
            self._publish(request, timeout=self.timeout)
            out.append((time.perf_counter() - started) * 1000)
        return out

    def read(self, request: bytes, sink: Sink) -> ReadFigures:
        """A whole Read stream: each response parsed (``ReadResponse``) and counted, its
        bytes handed to ``sink``. The clock covers the parsing: a reader must parse."""
        responses = messages = 0
        parse = pb.ReadResponse.FromString
        started = time.perf_counter()
        for raw in self._read(request, timeout=self.timeout):
            sink(raw)
            messages += len(parse(raw).messages)
            responses += 1
        return ReadFigures(time.perf_counter() - started, responses, messages)


def publish_request(topic: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> bytes:
    """One serialized ``PublishRequest``."""
    req = pb.PublishRequest(topic=topic)
    for key, value in records:
        rec = req.records.add()
        if key is not None:
            rec.key = key
        if value is not None:
            rec.value = value
    return bytes(req.SerializeToString())


def read_request(topic: str, compacted: bool) -> bytes:
    """A serialized ``ReadRequest`` of the whole topic from the earliest message."""
    req = pb.ReadRequest(topic=topic, position=pb.EARLIEST, read_compacted=compacted)
    return bytes(req.SerializeToString())


def acked(replies: Iterable[bytes]) -> int:
    """Message ids in serialized ``PublishResponse`` replies."""
    return sum(len(pb.PublishResponse.FromString(r).ids) for r in replies)


class FrameWriter:
    """Appends length-prefixed frames to a file; usable as a read ``Sink``."""

    def __init__(self, path: Path) -> None:
        self._fh: IO[bytes] = open(path, "wb")  # noqa: SIM115 (closed in close())
        self.frames = 0

    def __call__(self, frame: bytes) -> None:
        self._fh.write(FRAME.pack(len(frame)))
        self._fh.write(frame)
        self.frames += 1

    def close(self) -> None:
        self._fh.close()


def write_frames(path: Path, frames: Iterable[bytes]) -> int:
    """Write ``frames`` to ``path``; returns how many."""
    writer = FrameWriter(path)
    try:
        for frame in frames:
            writer(frame)
    finally:
        writer.close()
    return writer.frames


def read_frames(path: Path) -> Iterator[bytes]:
    """The frames of a file written by ``FrameWriter``, one at a time (bounded memory)."""
    with open(path, "rb") as fh:
        while head := fh.read(FRAME.size):
            (size,) = FRAME.unpack(head)
            yield fh.read(size)
