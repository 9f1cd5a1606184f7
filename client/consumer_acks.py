"""``ConsumerAcks``: what a threaded consumer sends about the messages it was given.

Acknowledgements (single and cumulative) go on the consumer's queue, sent in order by its
``AckSender`` thread (``Log.Acknowledge`` / ``AcknowledgeList``, at the topic's owner when
routed); a negative acknowledgement is sent at once, after the acks queued before it; the
ids whose ack timeout ran out are sent back from the sender's thread, which carries the
timeout's tick (``unacked_tracker``). The consumer (``consumer.py``) checks that it is
open and hands the calls here.
"""

from __future__ import annotations

import contextlib
from typing import Any

from compactlog.client import _convert as cv
from compactlog.client.ack_sender import AckSender
from compactlog.client.consumer_state import ConsumerState
from compactlog.client.errors import call
from compactlog.client.shard_routes import RoutedLog
from compactlog.errors import CompactlogError
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


class ConsumerAcks:
    """One consumer's acknowledgements and negative acknowledgements."""

    def __init__(
        self, stub: pb_grpc.LogStub, state: ConsumerState, address: str, timeout: float | None
    ) -> None:
        self._stub = stub
        self._state = state
        self._address = address
        self._timeout = timeout
        self.sender = AckSender(
            self._ack_future,
            lambda method, req: getattr(stub, method)(req, timeout=timeout),
            address,
            state.topic,
            state.subscription,
            state.unacked,  # its tick rides on the sender's thread
            self._send_back,
        )

    def acknowledge(self, message: cv.MessageIdLike, cumulative: bool) -> None:
        """Queued once checked (an id never given is ``NotDelivered`` here); a failure
        the server answered for an earlier one is raised first."""
        self.sender.queue.raise_failure()
        state = self._state
        mid = state.given_id(message)
        if state.unacked is not None:
            state.done_with(mid, cumulative)
        self.sender.put(mid, cumulative)

    def negative_acknowledge(self, message: cv.MessageIdLike) -> None:
        """Sent now, after the acks queued before it."""
        self.sender.flush()
        req = self._state.nack_request([message])
        self._state.done_with(req.ids[0])  # not timed from now on, as in pulsar-client
        self._negative(req)

    def _negative(self, req: pb.NegativeAcknowledgeRequest) -> None:
        call(
            "NegativeAcknowledge",
            self._address,
            lambda: self._stub.NegativeAcknowledge(req, timeout=self._timeout),
        )

    def _send_back(self, ids: list[pb.MessageId]) -> None:
        """Messages whose ack timeout ran out go out again (on the ack sender's thread).
        A server that cannot take it now redelivers them anyway when this consumer
        reconnects, as pulsar-client's tracker lets such a request go."""
        with contextlib.suppress(CompactlogError):
            self._negative(self._state.timed_out_request(ids))

    def _ack_future(self, method: str, req: Any) -> Any:
        """Acknowledge(List) sent now: its ``grpc.Future`` (at the topic's owner, when
        routed)."""
        stub = self._stub
        if isinstance(stub, RoutedLog):
            return stub.future(method, req, timeout=self._timeout)
        return getattr(stub, method).future(req, timeout=self._timeout)
