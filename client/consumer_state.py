"""What a consumer keeps between calls, with no I/O: the local buffer of fetched messages
and the requests built from that state.
``Consumer`` (threads) and ``aio.AsyncConsumer`` (asyncio) both drive one of these and only
do the calls themselves, so the two cannot drift apart.

Each Consume asks for up to ``receiver_queue_size`` messages (pulsar-client's name for the
prefetch); the response becomes the buffer at once (``messages_of``: one lazily converted
``Message`` each), ``receive`` hands them out one by one and ``batch_receive`` all that is
buffered. Which messages are unacknowledged is the server's to know (it redelivers them);
the consumer keeps only the highest id it was given of each partition
(``ack_queue.GivenIds``), so an ack of an id it never had fails at once. A negative
acknowledgement goes to the server (``NegativeAcknowledge``), which gives the message out
again after the delay, on a shared subscription to any of its consumers (CONTRACT section
6). The ack timeout is the one thing timed here (``unacked``, an
``unacked_tracker.UnackedTracker``): from the hand-over, as pulsar-client times it; the
consumer sends back what ran out (``timed_out_request``).
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Iterable

from compactlog.client import _convert as cv
from compactlog.client.ack_queue import GivenIds
from compactlog.client.batch_policy import ConsumerBatchReceivePolicy
from compactlog.client.enums import ConsumerType, InitialPosition
from compactlog.client.errors import Timeout
from compactlog.client.message import Message, messages_of
from compactlog.client.subscriptions import subscription_type_to_pb
from compactlog.client.unacked_tracker import UnackedTracker
from compactlog.errors import InvalidArgument
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["ConsumerState"]

# A receive without timeout polls with this server-side wait, so the call stays short
# enough to notice a closed consumer or Ctrl-C, and long enough to cost nothing when idle.
POLL_WAIT_MS = 1000
# Slack on top of the server-side wait before the client gives up on a Consume call.
DEADLINE_SLACK_S = 10.0


def generated_name() -> str:
    """A consumer name no other consumer has (pulsar-client generates one too): two
    consumers made without names are two consumers to the server (CONTRACT section 6)."""
    return "consumer-" + uuid.uuid4().hex[:12]


class ConsumerState:
    """One consumer's buffer and books; every method returns at once."""

    def __init__(
        self,
        topic: str,
        subscription: str,
        read_compacted: bool = False,
        initial_position: InitialPosition = InitialPosition.Earliest,
        receiver_queue_size: int = 1000,
        consumer_type: ConsumerType | str = ConsumerType.Exclusive,
        consumer_name: str | None = None,
        negative_ack_redelivery_delay_ms: int = 60000,
        ack_timeout_ms: int = 0,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
    ) -> None:
        if not subscription:
            raise InvalidArgument("a subscription needs a name")
        if receiver_queue_size < 1:
            raise InvalidArgument("receiver_queue_size must be at least 1")
        if ack_timeout_ms < 0 or negative_ack_redelivery_delay_ms < 0:
            raise InvalidArgument("ack timeout and redelivery delay are milliseconds >= 0")
        if batch_receive_policy is not None and not isinstance(
            batch_receive_policy, ConsumerBatchReceivePolicy
        ):
            raise InvalidArgument(
                "batch_receive_policy is a compactlog.client.ConsumerBatchReceivePolicy"
            )
        self.batch_policy = batch_receive_policy
        self.topic = topic
        self.subscription = subscription
        self.read_compacted = read_compacted
        self.initial = pb.StartPosition.ValueType(initial_position.value)
        self.queue_size = receiver_queue_size
        if not isinstance(consumer_type, ConsumerType):  # a name: "shared", "Shared", ...
            consumer_type = ConsumerType(int(subscription_type_to_pb(consumer_type)))
        self.consumer_type = consumer_type
        self.consumer_name = consumer_name or generated_name()
        self.buffer: deque[Message] = deque()
        self.nack_delay_ms = negative_ack_redelivery_delay_ms
        self.ack_timeout_ms = ack_timeout_ms
        # The ack timeout, counted here from the hand-over as pulsar-client counts it
        # (the request's ``ack_timeout_ms``, the server's clock, stays 0).
        self.unacked = UnackedTracker(ack_timeout_ms) if ack_timeout_ms else None
        # A new consumer gets every unacknowledged message again, as in Pulsar.
        self._redeliver = True
        # A Consume goes ahead below this: once a full response is being worked through,
        # so the next is on its way while the application works (and acknowledges).
        self.low_water = receiver_queue_size - 1
        self.more_waiting = False  # the last response was full: more is waiting
        self._asked = 0
        self.given = GivenIds(topic, subscription)

    # -- fetching ------------------------------------------------------------------------

    def consume_request(self, max_messages: int, wait_ms: int) -> pb.ConsumeRequest:
        self._asked = max_messages
        req = pb.ConsumeRequest(
            topic=self.topic,
            subscription=self.subscription,
            read_compacted=self.read_compacted,
            initial_position=self.initial,
            max_messages=max_messages,
            wait_ms=max(0, wait_ms),
            redeliver_unacknowledged=self._redeliver,
            consumer_name=self.consumer_name,
            subscription_type=pb.SubscriptionType.ValueType(self.consumer_type.value),
        )
        return req

    @staticmethod
    def deadline(wait_ms: int, timeout: float | None) -> float:
        """The Consume call's deadline: the server-side wait plus the client's timeout."""
        return wait_ms / 1000 + (timeout if timeout is not None else DEADLINE_SLACK_S)

    def fetched(self, resp: pb.ConsumeResponse) -> None:
        self._redeliver = False
        self.more_waiting = len(resp.messages) >= self._asked
        messages = resp.messages  # one object: ``GivenIds.gave`` knows it by identity
        if messages:
            self.given.add(messages)
            self.buffer.extend(messages_of(messages, self.topic))

    @property
    def redelivering(self) -> bool:
        """The next Consume asks for every unacknowledged message again: acks made
        before it must be stored first."""
        return self._redeliver

    def fetch_failed(self) -> None:
        """The server moves no cursor for a call that failed there, but a response lost on
        the way (or refused here) counts as delivered: start again at the mark-delete
        position, as pulsar-client does on reconnect. The buffer is empty then, so nothing
        is held twice; acknowledged messages never come again."""
        self._redeliver = True

    # -- handing out -------------------------------------------------------------------------

    def ready(self) -> bool:
        """True when a message can be handed out."""
        return bool(self.buffer)

    def take(self) -> Message:
        """The next message (``ready()`` was True)."""
        return self.buffer.popleft()

    def take_batch(self, max_messages: int = 0, max_bytes: int = 0) -> list[Message]:
        """What is buffered (``ready()`` was True), in order: at most ``max_messages``
        and, after the first, ``max_bytes`` of values (0: no limit)."""
        buffer = self.buffer
        if max_bytes <= 0 and (max_messages <= 0 or max_messages >= len(buffer)):
            out = list(buffer)
            buffer.clear()
            return out
        out = [buffer.popleft()]
        size = len(out[0].data() or b"")
        while buffer and (max_messages <= 0 or len(out) < max_messages):
            size += len(buffer[0].data() or b"")
            if 0 < max_bytes < size:
                break
            out.append(buffer.popleft())
        return out

    def end_of(self, timeout_ms: int | None) -> float | None:
        return None if timeout_ms is None else time.monotonic() + timeout_ms / 1000

    def wait_ms(self, end: float | None, timeout_ms: int | None, first: bool = False) -> int:
        """How long the next Consume may wait on the server: until ``end``, or a poll when
        there is none. ``Timeout`` once ``end`` has passed, except on the ``first`` call
        of a receive, which always asks once (a timeout of 0 takes what is there)."""
        wait = POLL_WAIT_MS if end is None else int((end - time.monotonic()) * 1000)
        if first:
            wait = max(wait, 0)
        if wait < 0:
            raise self.timeout_error(timeout_ms)
        return wait

    def timeout_error(self, timeout_ms: int | None) -> Timeout:
        return Timeout(f"no message on {self.topic}/{self.subscription} within {timeout_ms} ms")

    # -- acknowledging -----------------------------------------------------------------------

    def given_id(self, message: cv.MessageIdLike) -> pb.MessageId | Message:
        """The wire id of a message to acknowledge; ``NotDelivered`` at once when this
        consumer was never given it (``ack_queue.GivenIds``). A message of one of the last
        responses given is returned as it is: checked by that, its id read when sent."""
        if type(message) is Message and self.given.gave(message):
            return message
        mid = cv.id_to_pb(message)
        self.given.check(mid)
        return mid

    def nack_request(
        self, messages: list[cv.MessageIdLike], delay_ms: int | None = None
    ) -> pb.NegativeAcknowledgeRequest:
        """The server gives these out again after ``delay_ms`` (default: the consumer's
        ``negative_ack_redelivery_delay_ms``)."""
        return pb.NegativeAcknowledgeRequest(
            topic=self.topic,
            subscription=self.subscription,
            ids=[cv.id_to_pb(m) for m in messages],
            redelivery_delay_ms=self.nack_delay_ms if delay_ms is None else delay_ms,
            consumer_name=self.consumer_name,
        )

    def timed_out_request(self, ids: list[pb.MessageId]) -> pb.NegativeAcknowledgeRequest:
        """The ids whose ack timeout ran out (``unacked``), out again at once: a negative
        acknowledgement with no delay, which, as Pulsar's ack-timeout redelivery
        (``redeliverUnacknowledgedMessages(ids)``), sends just these ids out again, to
        any consumer of a SHARED subscription, counting one redelivery each, and leaves
        the receiver queue alone."""
        return pb.NegativeAcknowledgeRequest(
            topic=self.topic,
            subscription=self.subscription,
            ids=ids,
            redelivery_delay_ms=0,
            consumer_name=self.consumer_name,
        )

    def handed(self, messages: Iterable[Message]) -> bool:
        """Messages given to the application now: their ack timeout starts. True when
        the tracker held nothing before (its tick's carrier has a deadline again)."""
        return self.unacked is not None and self.unacked.add(messages)

    def done_with(self, message: pb.MessageId | Message, cumulative: bool = False) -> None:
        """An acknowledgement (``cumulative``: of every id up to it) or a negative one:
        the message is no longer timed."""
        unacked = self.unacked
        if unacked is not None:
            if cumulative:
                unacked.remove_upto(message)
            else:
                unacked.remove(message)

    def close_request(self) -> pb.CloseConsumerRequest:
        """Leave the subscription now: the server gives what this consumer holds to the
        others and frees an EXCLUSIVE or FAILOVER subscription for the next consumer."""
        return pb.CloseConsumerRequest(
            topic=self.topic, subscription=self.subscription, consumer_name=self.consumer_name
        )

    def start_over(self) -> None:
        """Drop what is buffered and held: the next Consume asks for every
        unacknowledged message again (after a seek, or on request)."""
        self.clear()
        self._redeliver = True

    def clear(self) -> None:
        """Nothing buffered, nothing timed (pulsar-client drops its tracker's ids too)."""
        self.buffer.clear()
        self.more_waiting = False
        if self.unacked is not None:
            self.unacked.clear()
