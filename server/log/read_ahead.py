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

The next read starts before it is needed: once a step takes a response that leaves
``REFILL_AT`` or fewer kept while more is published past them, the read of the responses
after the last one kept goes to the executor at once (its bytes reserved in ``KEPT``), and
a later step takes what it read. A consumer on a ConsumeStream sends its permits back only
after it has taken a response, so the step that found nothing kept waited for the next
storage read on its turn, the consumer waiting with it (every 17th response of a stream
of 1,000-message responses); now that read runs while the responses before it go out and
the consumer works through them. A read under way is dropped with the rest (its
result never taken) by whatever drops the kept responses.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable

from compactlog.server.log.reading import STEP_BYTES, Response
from compactlog.storage.types import MessageId

# What a storage step returns: responses, each with the position it reaches, and the
# position reached (``reading.consume_step``).
Found = tuple[list[tuple[Response, MessageId]], MessageId | None]

# Responses read ahead at most, and their bytes at most, per subscription: as much as one
# executor step of a Read gathers (``STEP_BYTES``), so a consumer pays the hop as rarely.
READ_AHEAD = 16
READ_AHEAD_BYTES = STEP_BYTES
# The bytes every subscription's read-ahead holds at most, together (the Kafka
# listener's Fetch read-ahead, ``server.kafka.fetch_ahead``, counts its answers here too).
KEPT_MAX_BYTES = 64 * 1024 * 1024
# The next read starts once a step leaves this many responses kept, or fewer.
REFILL_AT = 4


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

    __slots__ = (
        "after", "compacted", "held", "limit", "max_bytes", "refill", "reserved", "responses",
    )  # fmt: skip

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
        # The read of the responses after the last one kept, while it is under way, and
        # the bytes ``KEPT`` holds for it until it is taken.
        self.refill: asyncio.Future[Found] | None = None
        self.reserved = 0

    def __del__(self) -> None:
        # Dropped: what it still held or reserved goes back; a read under way runs out
        # in the executor and its result is never taken.
        KEPT.bytes -= self.held + self.reserved

    def end(self) -> MessageId | None:
        """The position the last response kept reaches: where the next read starts."""
        return self.responses[-1][1] if self.responses else self.after

    def wants_refill(self, visible_end: MessageId) -> bool:
        """Whether the next read should start now: few responses left, none under way,
        more published past them, and room in ``KEPT``."""
        if self.refill is not None or len(self.responses) > REFILL_AT:
            return False
        end = self.end()
        return (end is None or end < visible_end) and KEPT.room()

    def refilling(self, read: Awaitable[Found]) -> None:
        """``read`` (of the responses after ``end()``, with these caps) is under way."""
        self.refill = refill = asyncio.ensure_future(read)
        refill.add_done_callback(_retrieved)
        self.reserved = READ_AHEAD_BYTES
        KEPT.bytes += READ_AHEAD_BYTES

    async def refilled(self) -> None:
        """Until the read under way is done, when nothing read is kept (nothing to take
        until it is)."""
        if self.refill is not None and not self.responses:
            await asyncio.wait((self.refill,))
        self._absorb()

    def _absorb(self) -> None:
        """Keep what the read under way found, once it is done; a read that failed is
        left to the step that reads there again (and meets the failure itself)."""
        refill = self.refill
        if refill is None or not refill.done():
            return
        self.refill = None
        KEPT.bytes -= self.reserved
        self.reserved = 0
        if refill.cancelled() or refill.exception() is not None:
            return
        found = refill.result()[0]
        size = sum(len(r[0][0]) for r in found)
        self.responses.extend(found)
        self.held += size
        KEPT.bytes += size

    def take(
        self, after: MessageId | None, limit: tuple[int, int], max_bytes: int, compacted: bool
    ) -> tuple[Response, MessageId] | None:
        """The next response when a step reading at ``after`` with these caps would
        read just that; None otherwise."""
        self._absorb()
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
        """Whether ``msg_id`` may be among the kept responses or those of the read under
        way (all of them lie past ``after``)."""
        held = bool(self.responses) or self.refill is not None
        return held and (self.after is None or msg_id > self.after)


def _retrieved(refill: asyncio.Future[Found]) -> None:
    """A read under way that failed, seen here: its step reads again and raises; one
    dropped before it was taken leaves no unretrieved exception behind."""
    if not refill.cancelled():
        refill.exception()
