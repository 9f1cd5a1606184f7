"""Negative acknowledgements, kept by the consumer itself (as pulsar-client's tracker).

``consumer.negative_acknowledge(msg)`` says "not now": the message comes back from
``receive`` once ``negative_ack_redelivery_delay_ms`` has passed. Pulsar's client keeps
these in a client-side tracker and asks the broker to redeliver; until the server has a
call for that (CONTRACT section 6, in progress) this consumer redelivers the message it
still holds, which is the same thing seen from ``receive``: the very message, id and
all, after the delay, and nothing lost if it is never acknowledged (the cursor has not
moved past it, so a new consumer gets it too).
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable

from compactlog.client.message import Message

__all__ = ["NegativeAcks"]


class NegativeAcks:
    """Messages waiting out their redelivery delay, earliest due first."""

    def __init__(self, delay_ms: int) -> None:
        self._delay_s = max(0, delay_ms) / 1000
        self._heap: list[tuple[float, int, Message]] = []
        self._order = itertools.count()  # equal due times keep their nack order

    def add(self, message: Message) -> None:
        due = time.monotonic() + self._delay_s
        heapq.heappush(self._heap, (due, next(self._order), message))

    def pop_due(self) -> list[Message]:
        """The messages whose delay has passed, in the order they were nacked."""
        now = time.monotonic()
        out: list[Message] = []
        while self._heap and self._heap[0][0] <= now:
            out.append(heapq.heappop(self._heap)[2])
        return out

    def seconds_to_next(self) -> float | None:
        """How long until the next one is due (0 if one is); None when none waits."""
        if not self._heap:
            return None
        return max(0.0, self._heap[0][0] - time.monotonic())

    def discard(self, acked: Callable[[Message], bool]) -> None:
        """Forget messages acknowledged meanwhile (an ack wins over an earlier nack)."""
        kept = [e for e in self._heap if not acked(e[2])]
        if len(kept) != len(self._heap):
            self._heap = kept
            heapq.heapify(self._heap)

    def clear(self) -> None:
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._heap)
