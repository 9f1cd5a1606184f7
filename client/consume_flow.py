"""``FlowStream``: one ``Log.ConsumeStream`` of a consumer, with Pulsar's flow permits.

The stream opens with the consumer's Consume request and ``receiver_queue_size`` permits;
the server pushes responses within them. Permits go back in one flow once the application
has taken half the queue's worth (``handed``): the consumer counts what it handed out when
its buffer falls to half (``low_water``) and when it runs empty, so the next response is
on its way while the application works through the rest, the consumer holds at most its
queue's size from the server and one response more (the rest of a stored batch the
server carries on to, as Pulsar's broker does), and ``receive`` pays nothing per message
for it.
A thread of the stream's reads the responses into a queue, so a receive waits for one
with its own timeout; gRPC's own thread sends the flows. ``end`` half-closes and waits
for the server to end its side (which releases the consumer there); a seek or redelivery
ends the stream and the next receive opens another, asking for the unacknowledged
messages again.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import grpc

from compactlog.client.errors import Timeout, call
from compactlog.rpc_errors import ServerUnreachable
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["FlowStream", "low_water"]

_END = object()  # the stream ended without an error


def low_water(queue_size: int) -> int:
    """The buffer's length at which the messages handed out so far go back as permits."""
    return queue_size // 2


class FlowStream:
    """One open ConsumeStream (see the module docstring)."""

    def __init__(self, stub: Any, start: pb.ConsumeRequest, queue_size: int, address: str) -> None:
        self._address = address
        self._topic = start.topic
        self._threshold = max(1, low_water(queue_size))
        self._handed = 0
        self._flows: queue.SimpleQueue[pb.ConsumeFlow | None] = queue.SimpleQueue()
        self._flows.put(pb.ConsumeFlow(topic=start.topic, start=start, permits=queue_size))
        self._responses: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._call: Any = call(
            "ConsumeStream", address, lambda: stub.ConsumeStream(self._requests())
        )
        self._admitted = threading.Event()
        self._reader = threading.Thread(
            target=self._read, name="compactlog-consume-stream", daemon=True
        )
        self._reader.start()

    def _requests(self) -> Iterator[pb.ConsumeFlow]:
        while (flow := self._flows.get()) is not None:
            yield flow

    def _read(self) -> None:
        try:
            self._call.initial_metadata()
            self._admitted.set()
            for response in self._call:
                self._responses.put(response)
        except grpc.RpcError as exc:
            self._responses.put(exc)
        finally:
            self._admitted.set()
            self._responses.put(_END)

    def admitted(self, timeout_s: float | None) -> None:
        """Wait until the server has the subscription and admitted this consumer (it
        answers with its headers then), raising why not; ``Timeout`` after ``timeout_s``."""
        if not self._admitted.wait(timeout_s):
            raise Timeout(f"ConsumeStream at {self._address} not answered in {timeout_s} s")
        if self._call.done() and self._call.code() != grpc.StatusCode.OK:

            def failed() -> None:
                raise self._call

            call("ConsumeStream", self._address, failed)

    def next(self, timeout_s: float | None) -> pb.ConsumeResponse | None:
        """The next response, or None when none came within ``timeout_s``; the stream's
        error is raised here (``ServerUnreachable`` when it ended without one)."""
        try:
            item = self._responses.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if isinstance(item, pb.ConsumeResponse):
            return item
        self._responses.put(item)  # every later call sees the end too
        if isinstance(item, grpc.RpcError):

            def failed() -> None:
                raise item

            call("ConsumeStream", self._address, failed)
        raise ServerUnreachable(f"the consume stream at {self._address} ended")

    def handed(self, count: int) -> None:
        """The application has taken ``count`` more messages: permits for as many go back
        once they make half the queue."""
        self._handed += count
        if self._handed >= self._threshold:
            self._flows.put(pb.ConsumeFlow(topic=self._topic, permits=self._handed))
            self._handed = 0

    def end(self, timeout_s: float, stay: bool = False) -> None:
        """Half-close and wait (at most ``timeout_s``) for the server's end, which
        releases this consumer there unless it ``stay``s (another stream of it follows at
        once); then the call is cancelled, whatever it was doing."""
        if stay:
            self._flows.put(pb.ConsumeFlow(topic=self._topic, stay=True))
        self._flows.put(None)
        self._reader.join(timeout_s)
        self._call.cancel()
