"""A subscription's read-ahead: responses read in the same scan as the one handed out.

A delivery step's storage read runs in the executor, and that hop (a thread woken, the
loop woken back) cost about as much as the step itself: a Consume of one response paid
it per response, where a Read pays it per 2 MiB. So a step reads on past its response
(``READ_AHEAD`` more responses, ``READ_AHEAD_BYTES`` at most, as ``consume_step`` cuts
them) and the subscription's dispatcher keeps them; the next step that would read at the
same position with the same caps takes the next one on the loop, no hop. The kept
responses were never handed out, so only what moves the subscription's read position
(a rewind, a takeover, a seek: the position no longer matches) or acknowledges an id
past it can make them wrong, and those drop them. What every subscription keeps is bounded
for the whole process (``KEPT``, as Pulsar bounds its managed-ledger cache): past it, a
step reads its one response as before.
"""

from __future__ import annotations

from collections import deque

from compactlog.server.log.reading import STEP_BYTES, Response
from compactlog.storage.types import MessageId

# Responses read ahead at most, and their bytes at most, per subscription: as much as one
# executor step of a Read gathers (``STEP_BYTES``), so a consumer pays the hop as rarely.
READ_AHEAD = 16
READ_AHEAD_BYTES = STEP_BYTES
# The bytes every subscription's read-ahead holds at most, together (the Kafka
# listener's Fetch read-ahead, ``server.kafka.fetch_ahead``, counts its answers here too).
KEPT_MAX_BYTES = 64 * 1024 * 1024


class Kept:
    """The bytes read-ahead responses hold now, across subscriptions (loop thread only)."""

    __slots__ = ("bytes", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.bytes = 0

    def room(self, size: int = READ_AHEAD_BYTES) -> bool:
        """Whether a step may read ahead: what is kept leaves room for one more's
        (``size`` bytes: a subscription step's cap unless told)."""
        return self.bytes + size <= self.limit


KEPT = Kept(KEPT_MAX_BYTES)


class ReadAhead:
    """Responses that follow ``after`` in a subscription's view, each with the position
    delivery reaches with it, read for steps of ``limit`` (``max_messages`` and
    ``whole_to``, as ``consume_step`` cuts them) and ``max_bytes``."""

    __slots__ = ("after", "compacted", "held", "limit", "max_bytes", "responses")

    def __init__(
        self,
        after: MessageId | None,
        limit: tuple[int, int],
        max_bytes: int,
        compacted: bool,
        responses: list[tuple[Response, MessageId]],
    ) -> None:
        self.after = after
        self.limit = limit
        self.max_bytes = max_bytes
        self.compacted = compacted
        self.responses = deque(responses)
        self.held = sum(len(r[0][0]) for r in responses)
        KEPT.bytes += self.held

    def __del__(self) -> None:
        KEPT.bytes -= self.held  # dropped: what it still held goes back

    def take(
        self, after: MessageId | None, limit: tuple[int, int], max_bytes: int, compacted: bool
    ) -> tuple[Response, MessageId] | None:
        """The next response when a step reading at ``after`` with these caps would
        read just that; None otherwise."""
        if (
            not self.responses
            or after != self.after
            or limit != self.limit
            or max_bytes != self.max_bytes
            or compacted != self.compacted
        ):
            return None
        response, self.after = self.responses.popleft()
        self.held -= len(response[0])
        KEPT.bytes -= len(response[0])
        return response, self.after

    def covers(self, msg_id: MessageId) -> bool:
        """Whether ``msg_id`` may be among the kept responses (all of them lie past
        ``after``)."""
        return bool(self.responses) and (self.after is None or msg_id > self.after)
