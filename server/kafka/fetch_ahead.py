"""Fetch read-ahead: a sequential consumer's next Fetch read while it handles this one.

librdkafka keeps one Fetch in flight a broker, so a consumer's read is a series of round
trips, each holding the server's read and conversion and then the client's parse, one
after the other. When a connection's Fetch continues its previous one (each partition at
the offset the previous answer ended at, the same partitions in the same order, the same
limits), the listener starts reading the answer to the next such Fetch in the fetch
worker once this one's answer is sent, and, as each such read ends, the answer after it,
up to ``DEPTH`` answers ahead: the server keeps working while the client parses, and a
read that runs late (the core was busy) does not hold the client's next Fetch.

A prepared answer is used only for a Fetch asking exactly that, only when nothing but
appends happened to its logs since it was read (each log's ``generation``, noted before
the read, is unchanged: a cleaner swap, retention, DeleteRecords, a config change or a
topic deleted and created again each change it), and only when it meets the Fetch's
``min_bytes`` with no partition failed; otherwise the Fetch reads afresh and long-polls
exactly as without read-ahead. Its high watermarks and log start offsets are read when it
is sent; its records may be fewer than the log holds by then (a Fetch may return fewer).
A read ahead starts each partition from the stored batches the answer before it read
but could not give (``fetch_read.Spare``), so a stored batch is read and checked once.
The chain reads on from an answer only while its logs' generations are still the ones
noted before it was read. A connection's chain is dropped on any Fetch other than the
one its first answer answers and when the connection closes; the bytes every chain
holds count in the process's one read-ahead bound (``server.log.read_ahead.KEPT``, with
the subscriptions' read-ahead): past it nothing more is read ahead. Nothing is read ahead
for a connection whose Fetches are not sequential, nor after an answer that reached
every partition's high watermark (the next Fetch long-polls).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace

from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.fetch_read import Read, Spare, Wanted, generation, read_all
from compactlog.server.kafka.topics import KafkaContext
from compactlog.server.log.read_ahead import KEPT

# the connection a Fetch came on: its read-ahead (None: a Fetch from no connection)
READ_AHEAD: ContextVar[ReadAhead | None] = ContextVar("kafka_read_ahead", default=None)
# what a Fetch asks of the logs: its max_bytes, and each (topic, partition, offset, limit)
Shape = tuple[int, tuple[tuple[str, int, int, int], ...]]
# Answers a connection keeps read ahead at most, the one being read included.
DEPTH = 2


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


def _limit(wanted: Sequence[Wanted], max_bytes: int) -> int:
    """The bytes an answer to ``wanted`` may hold (its first batch may pass it)."""
    return min(max_bytes, sum(w.max_bytes for w in wanted))


@dataclass(eq=False)
class _Link:
    """One answer of the chain read ahead: the Fetch it answers (``wanted``, whose
    ``shape``) and its read; ``held``: its records' bytes counted in ``KEPT``."""

    shape: Shape
    wanted: list[Wanted]
    max_bytes: int
    future: asyncio.Future[Prepared]
    held: int = 0


class ReadAhead:
    """One connection's read-ahead: the shape of the Fetch that would continue its last
    one, the read of it due once the last answer is sent, and a chain of at most
    ``DEPTH`` answers read ahead, each the continuation of the one before it."""

    def __init__(self) -> None:
        self._ctx: KafkaContext | None = None
        self._next: Shape | None = None
        self._due: tuple[list[Wanted], int, list[Spare | None]] | None = None
        self._chain: deque[_Link] = deque()

    def take(self, shape: Shape) -> tuple[bool, asyncio.Future[Prepared] | None]:
        """Whether a Fetch of ``shape`` continues the last one, and the answer read ahead
        for it if there is one; a chain read for another shape is dropped."""
        sequential = shape == self._next
        self._due = None
        if not self._chain or self._chain[0].shape != shape:
            self._drop()
            return sequential, None
        link = self._chain.popleft()
        self._release(link)  # the Fetch holds it now, no longer kept ahead
        return sequential, link.future

    def follow(
        self,
        ctx: KafkaContext,
        wanted: Sequence[Wanted],
        reads: Sequence[Read],
        max_bytes: int,
        sequential: bool,
    ) -> None:
        """After a Fetch of ``wanted`` answered with ``reads``: note the shape of the Fetch
        that continues it; a chain that does not start there is dropped, and when this
        Fetch continued the last and no chain goes on, reading on is due once the answer
        is sent (``sent``)."""
        self._ctx = ctx
        following = [replace(w, offset=r.next_offset) for w, r in zip(wanted, reads, strict=True)]
        self._next = shape_of(following, max_bytes)
        if self._chain and self._chain[0].shape != self._next:
            self._drop()
        if sequential and not self._chain and _worth(wanted, reads):
            self._due = (following, max_bytes, [r.spare for r in reads])

    def sent(self) -> None:
        """An answer went out: start the read it made due, or let the chain go on. Not
        earlier: the worker's Python steps would take the GIL from the loop while it
        encodes and sends the answer the client waits for (3-9 ms a 1 MiB Fetch on the
        2-core VM)."""
        due, self._due = self._due, None
        if due is not None:
            self._start(*due)
        else:
            self._extend()

    def close(self) -> None:
        """The connection closed: its answers read ahead go (unread, if not begun)."""
        self._next = self._due = None
        self._drop()

    def _start(self, wanted: list[Wanted], max_bytes: int, spares: list[Spare | None]) -> None:
        """Read the answer to ``wanted`` in the fetch worker, as the chain's last link,
        when ``KEPT`` has room for it."""
        if self._ctx is None or not KEPT.room(_limit(wanted, max_bytes)):
            return
        try:
            future = asyncio.ensure_future(self._ctx.run(prepare, wanted, max_bytes, spares))
        except RuntimeError:  # the worker takes no more work: the server is stopping
            return
        link = _Link(shape_of(wanted, max_bytes), wanted, max_bytes, future)
        self._chain.append(link)
        future.add_done_callback(lambda _f: self._read(link))

    def _read(self, link: _Link) -> None:
        """A link's read ended (on the loop): count its bytes and read on from it."""
        if link not in self._chain or link.future.cancelled():
            return  # dropped or taken meanwhile
        if link.future.exception() is None:
            link.held = sum(len(r.records) for r in link.future.result().reads)
            KEPT.bytes += link.held
        self._extend()

    def _extend(self) -> None:
        """Read on from the chain's last link when it is read, the chain is shorter than
        ``DEPTH``, and reading on can pay with the log unchanged but for appends since
        that link was read."""
        if not self._chain or len(self._chain) >= DEPTH:
            return
        last = self._chain[-1]
        if not last.future.done() or last.future.cancelled() or last.future.exception():
            return
        prepared = last.future.result()
        if not _worth(last.wanted, prepared.reads):
            return
        if [generation(w.log) for w in last.wanted] != prepared.generations:
            return  # the log changed: this link will be read afresh, and what follows it
        following = [
            replace(w, offset=r.next_offset)
            for w, r in zip(last.wanted, prepared.reads, strict=True)
        ]
        self._start(following, last.max_bytes, [r.spare for r in prepared.reads])

    def _drop(self) -> None:
        for link in self._chain:
            link.future.cancel()
            self._release(link)
        self._chain.clear()

    @staticmethod
    def _release(link: _Link) -> None:
        KEPT.bytes -= link.held
        link.held = 0


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
