"""``Producer``: publish records to one topic.

``send`` is one unary Publish per record (simple, ~2k/s); ``send_batch`` puts many records in
one Publish (all or none); ``send_stream`` pipelines batches over one PublishStream, which is
the fast path: per-message gRPC cost dominates, so batch records in every request.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from compactlog.client import _convert as cv
from compactlog.client.closeable import Closeable
from compactlog.client.deadlines import StreamWatch, Watchdog
from compactlog.client.errors import AlreadyClosed, call, cancel, translate_errors
from compactlog.client.routing import PartitionRouter
from compactlog.client.shard_routes import ClientLog
from compactlog.client.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb


class Producer(Closeable):
    """Sends to one topic. Cheap to create; holds no server-side state."""

    def __init__(
        self,
        stub: ClientLog,
        topic: str,
        address: str,
        timeout: float | None,
        watchdog: Watchdog | None = None,
        partitions: int = 0,
    ) -> None:
        self._stub = stub
        self._topic = topic
        # A partitioned topic: requests go to the partition their records route to.
        self._router = PartitionRouter(topic, partitions) if partitions > 1 else None
        self._address = address
        self._timeout = timeout
        self._watchdog = watchdog
        self._closed = False

    def topic(self) -> str:
        return self._topic

    @property
    def one_log(self) -> bool:
        """The topic is one log (not partitioned): its ids rise in request order."""
        return self._router is None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Nothing is buffered client-side; closing only refuses later sends."""
        self._closed = True

    def send(
        self,
        key: cv.BytesLike,
        value: cv.BytesLike,
        properties: Mapping[str, str] | None = None,
        event_time_ms: int = 0,
    ) -> MessageId:
        """Publish one record, durable when this returns. ``None`` key: keyless; value: null."""
        return self.send_batch([(key, value, properties, event_time_ms)])[0]

    def send_batch(self, records: Iterable[cv.RecordLike]) -> list[MessageId]:
        """Publish records in one request: all are stored or none. Ids in request order."""
        if self._closed:
            raise AlreadyClosed("the producer is closed")
        req = cv.publish_request(self._topic, records)
        if self._router is not None:
            req.topic = self._router.target(req)
        resp = call(
            "Publish", self._address, lambda: self._stub.Publish(req, timeout=self._timeout)
        )
        return cv.ids_from_pb(resp.ids, self._router is None)

    def send_stream(self, batches: Iterable[Iterable[cv.RecordLike]]) -> Iterator[list[MessageId]]:
        """Publish each batch over one PublishStream; yields each batch's ids as it is acked.

        Batches are converted lazily, so a generator of batches streams without being
        held in memory. Each batch is atomic on its own; a failure stops the stream and
        earlier batches stay published (their ids are yielded before the error is raised).
        While a batch waits for its reply, the reply must come within the client's
        timeout (``Timeout`` otherwise); time spent producing the batches does not count.
        """
        if self._closed:
            raise AlreadyClosed("the producer is closed")
        feed = _RequestFeed()
        one_log = self._router is None

        def open_call(owed: _Owed) -> Any:
            responses = self._stub.PublishStream(feed.requests())
            feed.start(self._topic, batches, owed)
            return responses

        for resp in self._pipeline(open_call, feed):
            yield cv.ids_from_pb(resp.ids, one_log)

    def send_encoded(self, requests: Iterable[bytes]) -> Iterator[pb.PublishResponse]:
        """``send_stream`` for requests already encoded (``PublishRequest`` bytes, as
        ``send_async`` writes them): each goes to gRPC as it is, taken from ``requests``
        on gRPC's thread (nothing there to convert, so nothing to fail); yields the
        replies in order."""
        if self._closed:
            raise AlreadyClosed("the producer is closed")

        def open_call(owed: _Owed) -> Any:
            def counted() -> Iterator[bytes]:
                for request in requests:
                    owed.sent()
                    yield request
                owed.sent()  # the end of the stream owes its status

            return self._stub.PublishStreamEncoded(counted())

        yield from self._pipeline(open_call, None)

    def _pipeline(
        self, open_call: Callable[[_Owed], Any], feed: _RequestFeed | None
    ) -> Iterator[pb.PublishResponse]:
        """The replies of the PublishStream ``open_call`` starts, in order, each due
        within the timeout while a request is outstanding; errors as ``CompactlogError``."""
        opened: list[Any] = []
        watch = StreamWatch(
            self._watchdog,
            self._timeout,
            lambda: cancel(opened[0]) if opened else None,
            f"PublishStream {self._topic}",
        )
        owed = _Owed(watch)  # replies outstanding (the end of the stream counts as one)
        responses = open_call(owed)
        opened.append(responses)
        failure = feed.failure if feed is not None else []
        try:
            with translate_errors("PublishStream", self._address):
                try:
                    for resp in responses:
                        owed.answered()
                        yield resp
                except Exception:
                    if watch.expired:
                        raise watch.timeout_error() from None
                    if failure:
                        raise failure[0] from None
                    raise
            if failure:
                raise failure[0]
        finally:
            watch.disarm()
            if feed is not None:
                feed.stop()
            cancel(responses)  # a no-op once the call has finished


class _RequestFeed:
    """The request side of one PublishStream. The request iterator runs on a gRPC thread,
    where a bad record would be lost, so batches are converted on a thread of ours and
    handed over through a bounded queue; a conversion error half-closes the stream (the
    batches before it still get their replies) and is kept for the caller's thread."""

    def __init__(self) -> None:
        self._queue: queue.Queue[pb.PublishRequest | None] = queue.Queue(maxsize=16)
        self._stopped = threading.Event()
        self.failure: list[BaseException] = []

    def requests(self) -> Iterator[pb.PublishRequest]:
        return iter(self._queue.get, None)

    def start(self, topic: str, batches: Iterable[Iterable[cv.RecordLike]], owed: _Owed) -> None:
        def put(item: pb.PublishRequest | None) -> bool:
            while not self._stopped.is_set():
                try:
                    self._queue.put(item, timeout=0.1)
                    owed.sent()
                    return True
                except queue.Full:
                    continue
            return False

        def feed() -> None:
            try:
                for batch in batches:
                    if not put(cv.publish_request(topic, batch)):
                        return
            except BaseException as exc:  # re-raised on the caller's thread
                self.failure.append(exc)
            finally:
                put(None)

        threading.Thread(target=feed, name="compactlog-publish-stream", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)  # wake gRPC's request thread if it waits on get()


class _Owed:
    """Replies a PublishStream still owes: the watch runs while any is outstanding, its
    clock restarted by each reply."""

    def __init__(self, watch: StreamWatch) -> None:
        self._watch = watch
        self._lock = threading.Lock()
        self._count = 0

    def sent(self) -> None:
        with self._lock:
            self._count += 1
            if self._count == 1:
                self._watch.arm()

    def answered(self) -> None:
        with self._lock:
            self._count = max(0, self._count - 1)
            if self._count:
                self._watch.arm()
            else:
                self._watch.disarm()
