"""``Reader``: iterate a topic from a position, raw or compacted, over one Read stream.

Like pulsar-client's Reader it keeps no server-side cursor. The server sends messages in
batches per response; ``batches()`` hands them out a response at a time (``messages_of``:
one lazily converted ``Message`` each), and iterating the reader flattens them. Closing
cancels the stream, which is how a ``follow`` read ends. With a ``timeout`` the stream's
start, and for a bounded read each next response, must come within it (``deadlines``); a
follow read then waits for new messages as long as its caller does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Literal

import grpc

from compactlog.client import _convert as cv
from compactlog.client.closeable import Closeable
from compactlog.client.deadlines import StreamWatch, Watchdog
from compactlog.client.errors import AlreadyClosed, cancel, from_rpc_error
from compactlog.client.message import messages_of
from compactlog.client.types import Message, MessageId
from compactlog.errors import InvalidArgument
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

StartLike = Literal["earliest", "latest"] | MessageId | tuple[int, int]


def read_request(
    topic: str,
    start: StartLike = "earliest",
    start_timestamp_ms: int | None = None,
    read_compacted: bool = False,
    follow: bool = False,
    max_messages: int = 0,
    as_of: MessageId | tuple[int, int] | None = None,
    as_of_time_ms: int | None = None,
) -> pb.ReadRequest:
    """The ReadRequest for these options; checked here so mistakes fail before any I/O.
    ``as_of`` / ``as_of_time_ms`` read the compacted view of the past (with
    ``read_compacted``; docs/reading-the-past.md)."""
    if max_messages < 0:
        raise InvalidArgument(f"max_messages must be >= 0, got {max_messages}")
    req = pb.ReadRequest(
        topic=topic, read_compacted=read_compacted, follow=follow, max_messages=max_messages
    )
    if as_of is not None:
        req.as_of.CopyFrom(cv.id_to_pb(as_of))
    if as_of_time_ms is not None:
        req.as_of_time_ms = as_of_time_ms
    if start_timestamp_ms is not None:
        if start not in ("earliest", None):
            raise InvalidArgument("give either start or start_timestamp_ms, not both")
        req.timestamp_ms = start_timestamp_ms
    elif start == "earliest":
        req.position = pb.EARLIEST
    elif start == "latest":
        req.position = pb.LATEST
    elif start == MessageId.earliest:  # pulsar-client's names for the two ends
        req.position = pb.EARLIEST
    elif start == MessageId.latest:
        req.position = pb.LATEST
    elif isinstance(start, tuple) and len(start) == 2:
        req.message_id.CopyFrom(cv.id_to_pb(start))
    else:
        raise InvalidArgument(
            f"start must be 'earliest', 'latest' or a (ledger, entry) id, not {start!r}"
        )
    return req


class Reader(Closeable):
    """An iterator of ``Message``; a context manager whose exit cancels the stream."""

    def __init__(
        self,
        stub: pb_grpc.LogStub,
        topic: str,
        address: str,
        start: StartLike = "earliest",
        start_timestamp_ms: int | None = None,
        read_compacted: bool = False,
        follow: bool = False,
        max_messages: int = 0,
        timeout: float | None = None,
        watchdog: Watchdog | None = None,
        as_of: MessageId | tuple[int, int] | None = None,
        as_of_time_ms: int | None = None,
    ) -> None:
        self._topic = topic
        self._address = address
        self._follow = follow
        req = read_request(
            topic,
            start,
            start_timestamp_ms,
            read_compacted,
            follow,
            max_messages,
            as_of,
            as_of_time_ms,
        )
        self._call = stub.Read(req)
        self._watch = StreamWatch(watchdog, timeout, lambda: cancel(self._call), f"Read {topic}")
        self._batches = self._iterate()
        self._ready: deque[Message] = deque()
        self._last: Message | None = None
        self._closed = False

    @property
    def last_id(self) -> MessageId | None:
        """Id of the last message handed out, e.g. to resume a read after it."""
        return None if self._last is None else self._last.id

    def topic(self) -> str:
        return self._topic

    def __iter__(self) -> Iterator[Message]:
        return self

    def __next__(self) -> Message:
        ready = self._ready
        while not ready:
            if self._closed:
                raise StopIteration
            ready.extend(next(self._batches))
        msg = self._last = ready.popleft()
        return msg

    def read_next(self) -> Message | None:
        """The next message, or ``None`` once the read has ended (pulsar-client's name)."""
        return next(self, None)

    def batches(self) -> Iterator[list[Message]]:
        """The rest of the read a response at a time (never an empty list); what
        ``__next__`` has buffered comes first."""
        if self._ready:
            first = list(self._ready)
            self._ready.clear()
            self._last = first[-1]
            yield first
        while not self._closed:
            try:
                batch = next(self._batches)
            except StopIteration:
                return
            self._last = batch[-1]
            yield batch

    def _iterate(self) -> Iterator[list[Message]]:
        try:
            self._watch.arm()
            self._call.initial_metadata()  # the stream has started: the topic was found
            self._watch.disarm()
            while True:
                if not self._follow:
                    self._watch.arm()
                try:
                    resp = next(self._call)
                except StopIteration:
                    return
                finally:
                    self._watch.disarm()
                if resp.messages:
                    yield messages_of(resp.messages, self._topic)
        except grpc.RpcError as err:
            if self._watch.expired:
                raise self._watch.timeout_error() from None
            if self._closed and err.code() == grpc.StatusCode.CANCELLED:
                return  # our own close(): the normal end of a follow read
            raise from_rpc_error(err, "Read", self._address) from None

    def __enter__(self) -> Reader:
        if self._closed:
            raise AlreadyClosed("the reader is closed")
        return self

    def close(self) -> None:
        """Cancel the stream; iteration ends. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._ready.clear()
            cancel(self._call)
