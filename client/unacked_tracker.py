"""``UnackedTracker``: a consumer's ack timeout, counted from the hand-over as
pulsar-client counts it (``unacked_messages_timeout_ms``).

pulsar-client starts a message's ack timer when the application gets it (``receive``,
``batch_receive``), not when it reaches the receiver queue: its ``UnAckedMessageTracker``
takes the id there, an acknowledgement (single or cumulative) or a negative one takes it
off, and a timer ticking every second (``TICK_S``, its default tick) sends back the ids
whose timeout has passed, so a message goes back between the timeout and the timeout plus
a tick after it was received (a timeout under a second is its own tick, as there). A
message left unread in the receiver queue is never timed.

The tracker does no I/O: the consumer calls ``add`` when it hands messages out and
``remove`` / ``remove_upto`` when they are acknowledged; whoever carries the tick (the
threaded consumer's ack sender thread, the asyncio consumer's task) waits until ``due()``
and sends back what ``expire()`` returns (``Log.NegativeAcknowledge`` with no delay: the
request that, like Pulsar's ``redeliverUnacknowledgedMessages(ids)``, sends just these ids
out again, counting one redelivery each). The clock is injectable so the timing is tested
without a server or a sleep. Every method takes the tracker's lock: the threaded consumer
adds on the application's thread and expires on its sender's.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable

from compactlog.client.message import Message
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["TICK_S", "Key", "UnackedTracker", "key_of"]

# pulsar-client's default tick (``ackTimeoutTickTime``, ``tickDurationInMs``): 1 s.
TICK_S = 1.0

Key = tuple[int, int, int]  # (partition, ledger, entry)


def key_of(message: pb.MessageId | Message) -> Key | None:
    """The tracker's key of a wire id or of a message read from the server (None for a
    message built from its fields: it was never handed out by a consumer)."""
    if type(message) is Message:
        wire = message.wire_id()
        if wire is None:
            return None
        message = wire
    assert isinstance(message, pb.MessageId)
    return (message.partition, message.ledger_id, message.entry_id)


class UnackedTracker:
    """The ids handed to the application and not acknowledged yet, with when each was
    handed over, in that order."""

    def __init__(
        self,
        timeout_ms: int,
        tick_s: float = TICK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeout_ms <= 0 or tick_s <= 0:
            raise ValueError("the ack timeout and its tick are positive")
        self.timeout_s = timeout_ms / 1000.0
        self.tick_s = min(tick_s, self.timeout_s)  # a shorter timeout ticks as often
        self._clock = clock
        self._origin = clock()  # the ticks fall at origin + n * tick_s
        self._since: dict[Key, float] = {}  # key -> when handed over; oldest first
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._since)

    def add(self, messages: Iterable[Message]) -> bool:
        """Messages handed to the application now; True when the tracker held nothing
        before (the tick's carrier has a first deadline to wait for). Runs once a message
        received: ``key_of`` inlined."""
        now = self._clock()
        with self._lock:
            since = self._since
            was_empty = not since
            for message in messages:
                wire = message.wire_id()
                if wire is None:
                    continue
                key = (wire.partition, wire.ledger_id, wire.entry_id)
                if key in since:
                    del since[key]  # handed over again: timed from now, at the end
                since[key] = now
            return was_empty and bool(since)

    def remove(self, message: pb.MessageId | Message) -> None:
        """An acknowledgement or a negative one: the id is no longer timed."""
        key = key_of(message)
        if key is not None and key in self._since:
            with self._lock:
                self._since.pop(key, None)

    def remove_upto(self, message: pb.MessageId | Message) -> None:
        """A cumulative acknowledgement: every id of its partition up to it is done."""
        key = key_of(message)
        if key is None:
            return
        partition, upto = key[0], key[1:]
        with self._lock:
            for done in [k for k in self._since if k[0] == partition and k[1:] <= upto]:
                del self._since[done]

    def clear(self) -> None:
        """Nothing is timed any more (a close, a seek, a redelivery of everything)."""
        with self._lock:
            self._since.clear()

    def _tick_at_or_after(self, at: float) -> float:
        ticks = math.ceil(round((at - self._origin) / self.tick_s, 9))
        return self._origin + max(ticks, 0) * self.tick_s

    def due(self) -> float | None:
        """The clock's time of the next tick that sends something back (None: nothing
        is timed)."""
        with self._lock:
            if not self._since:
                return None
            first = next(iter(self._since.values()))
        return self._tick_at_or_after(first + self.timeout_s)

    def expire(self) -> list[pb.MessageId]:
        """The ids whose timeout had passed by the last tick, taken off (they go out
        again and are timed anew when handed over again); empty before ``due()``."""
        now = self._clock()
        ticks = math.floor(round((now - self._origin) / self.tick_s, 9))
        tick = self._origin + ticks * self.tick_s
        out = []
        with self._lock:
            since = self._since
            while since:
                key, at = next(iter(since.items()))
                if self._tick_at_or_after(at + self.timeout_s) > tick:  # as ``due`` reckons
                    break
                del since[key]
                out.append(pb.MessageId(partition=key[0], ledger_id=key[1], entry_id=key[2]))
        return out
