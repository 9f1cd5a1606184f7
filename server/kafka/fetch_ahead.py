"""Fetch read-ahead: a sequential consumer's next Fetch read while it handles this one.

librdkafka keeps one Fetch in flight a broker, so a consumer's read is a series of round
trips, each holding the server's read and conversion and then the client's parse, one
after the other. When a connection's Fetch continues its previous one (each partition at
the offset the previous answer ended at, the same partitions in the same order, the same
limits), the listener starts reading the answer to the next such Fetch in the fetch
worker once this one's answer is sent, so the client's next Fetch finds it ready.

A prepared answer is used only for a Fetch asking exactly that, only when nothing but
appends happened to its logs since it was read (each log's ``generation``, noted before
the read, is unchanged: a cleaner swap, retention, DeleteRecords, a config change or a
topic deleted and created again each change it), and only when it meets the Fetch's
``min_bytes`` with no partition failed; otherwise the Fetch reads afresh and long-polls
exactly as without read-ahead. Its high watermarks and log start offsets are read when it
is sent; its records may be fewer than the log holds by then (a Fetch may return fewer).
A read ahead starts each partition from the stored batches the answer before it read
but could not give (``fetch_read.Spare``), so a stored batch is read and checked once.
A connection holds one prepared answer at most, read within its Fetch's limits, dropped
on any other Fetch and when the connection closes. Nothing is read ahead for a
connection whose Fetches are not sequential, nor after an answer that reached every
partition's high watermark (the next Fetch long-polls).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import partial

from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.fetch_read import Read, Spare, Wanted, generation, read_all
from compactlog.server.kafka.topics import KafkaContext

# the connection a Fetch came on: its read-ahead (None: a Fetch from no connection)
READ_AHEAD: ContextVar[ReadAhead | None] = ContextVar("kafka_read_ahead", default=None)
# what a Fetch asks of the logs: its max_bytes, and each (topic, partition, offset, limit)
Shape = tuple[int, tuple[tuple[str, int, int, int], ...]]


def shape_of(wanted: Sequence[Wanted], max_bytes: int) -> Shape:
    return max_bytes, tuple((w.topic, w.partition, w.offset, w.max_bytes) for w in wanted)


@dataclass(frozen=True)
class Prepared:
    """An answer read ahead: each log's generation as it was before the read, the reads."""

    generations: list[int | None]
    reads: list[Read]


def prepare(wanted: list[Wanted], max_bytes: int, spares: Sequence[Spare | None]) -> Prepared:
    """The fetch worker's read ahead, from the ``spares`` the answer before left; the
    generations first, so a change during the read shows as a change."""
    return Prepared([generation(w.log) for w in wanted], read_all(wanted, max_bytes, spares))


def _worth(wanted: Sequence[Wanted], reads: Sequence[Read]) -> bool:
    """Whether reading on from an answer can pay: every partition read without error
    from a log with a generation, some records given and some left at the time."""
    return (
        all(
            r.error == ErrorCode.none and generation(w.log) is not None
            for w, r in zip(wanted, reads, strict=True)
        )
        and any(r.records for r in reads)
        and any(r.next_offset < r.high_watermark for r in reads)
    )


class ReadAhead:
    """One connection's read-ahead: the shape of the Fetch that would continue its last
    one, the read of it due once the last answer is sent, and at most one answer read
    ahead, each with the shape it answers."""

    def __init__(self) -> None:
        self._next: Shape | None = None
        self._due: tuple[Shape, Callable[[], Awaitable[Prepared]]] | None = None
        self._ahead: tuple[Shape, asyncio.Future[Prepared]] | None = None

    def take(self, shape: Shape) -> tuple[bool, asyncio.Future[Prepared] | None]:
        """Whether a Fetch of ``shape`` continues the last one, and the answer read ahead
        for it if there is one; an answer read for another shape is dropped."""
        sequential = shape == self._next
        ahead, self._ahead, self._due = self._ahead, None, None
        if ahead is not None and ahead[0] != shape:
            ahead[1].cancel()
            ahead = None
        return sequential, None if ahead is None else ahead[1]

    def follow(
        self,
        ctx: KafkaContext,
        wanted: Sequence[Wanted],
        reads: Sequence[Read],
        max_bytes: int,
        sequential: bool,
    ) -> None:
        """After a Fetch of ``wanted`` answered with ``reads``: note the shape of the Fetch
        that continues it and, when this one continued the last, make reading that due
        once the answer is sent (``sent``)."""
        following = [replace(w, offset=r.next_offset) for w, r in zip(wanted, reads, strict=True)]
        self._next = shape_of(following, max_bytes)
        if sequential and _worth(wanted, reads):
            spares = [r.spare for r in reads]
            self._due = (self._next, partial(ctx.run, prepare, following, max_bytes, spares))

    def sent(self) -> None:
        """An answer went out: start the read it made due, if any. Not earlier: the
        worker's Python steps would take the GIL from the loop while it encodes and sends
        the answer the client waits for (3-9 ms a 1 MiB Fetch on the 2-core VM)."""
        due, self._due = self._due, None
        if due is None:
            return
        shape, read = due
        try:
            self._ahead = (shape, asyncio.ensure_future(read()))
        except RuntimeError:  # the worker takes no more work: the server is stopping
            self._ahead = None

    def close(self) -> None:
        """The connection closed: its answer read ahead goes (unread, if not begun)."""
        self._next = self._due = None
        if self._ahead is not None:
            self._ahead[1].cancel()
            self._ahead = None


async def prepared_reads(
    ahead: asyncio.Future[Prepared], wanted: Sequence[Wanted], min_bytes: int
) -> list[Read] | None:
    """The reads of an answer read ahead for ``wanted``, with each partition's high
    watermark and log start offset as they are now; None when it cannot stand for a
    fresh read: a partition failed or its log changed but for appends, or it holds
    fewer than ``min_bytes`` (or no bytes)."""
    prepared = await ahead
    reads = prepared.reads
    if any(r.error != ErrorCode.none for r in reads):
        return None
    if sum(len(r.records) for r in reads) < max(min_bytes, 1):
        return None
    fresh = []
    for want, noted, read in zip(wanted, prepared.generations, reads, strict=True):
        log = want.log
        if log is None or noted is None or generation(log) != noted:
            return None
        start, end = log.earliest().entry_id, log.latest().entry_id
        fresh.append(replace(read, high_watermark=end, log_start=start))
    return fresh
