"""The append path of ``LedgerStore``: publish requests written to the WAL, then made durable.

A base of ``LedgerStore`` with one job: a group of publish requests for one topic is
written under one hold of the topic's lock, each request whole or not at all on its own
(``storage.chains``: a failed request stops the rest of its producer's stream), and the
group shares ONE group-commit ticket, so one fsync covers it. The request's bytes become
batches in ``storage.ledger_append``; readers see them once the sync confirms them
(``publish.durability = fsync``), or at once (``wal``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compactlog.errors import TopicNotFound
from compactlog.storage import batch as codec
from compactlog.storage.chains import NO_CHAIN, until_failed
from compactlog.storage.codec import LedgerMeta
from compactlog.storage.group_commit import GroupCommit
from compactlog.storage.key_indexer import KeyIndexer
from compactlog.storage.ledger_append import IdRun, PendingAppend, build_append
from compactlog.storage.ledger_group import GroupWrite, StagedAppend
from compactlog.storage.ledger_spanning import SpanningParts
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.rocks import RocksDB, Staged
from compactlog.storage.spanning import SpanningPart
from compactlog.storage.types import MessageId, Record


class LedgerAppends:
    """Base of LedgerStore: needs its RocksDB, clock, group commit, key indexer, marked
    parts and ledger allocation."""

    db: RocksDB
    fsync: bool
    clock: Callable[[], float]
    group_commit: GroupCommit
    key_indexer: KeyIndexer
    spanning_parts: SpanningParts

    def topic(self, name: str) -> LedgerTopic:
        raise NotImplementedError

    def _allocate_ledger(self, topic: str, role: int) -> LedgerMeta:
        raise NotImplementedError

    def append(self, name: str, records: Sequence[Record]) -> list[MessageId]:
        """Append all records or none; return their ids once durable."""
        return self.append_start(name, records).wait()

    def append_start(self, name: str, records: Sequence[Record]) -> PendingAppend:
        """``append_request_start`` for domain records: they take the wire encoder's path."""
        return self.append_request_start(name, codec.records_to_request(records))

    def append_request_start(
        self, name: str, request: bytes, partition: int = 0, part: SpanningPart | None = None
    ) -> PendingAppend:
        """Write the records of a raw ``PublishRequest`` to the WAL now; ``wait()`` on the
        result for durability.

        Splitting the two lets a stream of publishes overlap the next request's work
        with the previous one's fsync, so one client gets group commit too. ``part``: the
        request is a marked part of a spanning publish, stored at most once
        (``storage/ledger_spanning.py``).
        """
        result = self.append_requests_start(name, [(request, part)], partition)[0]
        if isinstance(result, Exception):
            raise result
        return result

    def append_requests_start(
        self,
        name: str,
        requests: Sequence[tuple[bytes, SpanningPart | None]],
        partition: int = 0,
        chains: Sequence[int] | None = None,
    ) -> list[PendingAppend | Exception]:
        """``append_request_start`` of several requests to one topic, in order, under one
        hold of the topic's lock and covered by ONE group-commit ticket (one fsync, one
        callback round for them all: what a log's writer hands over, ``server/log/writer``).
        Each request is stored whole or not at all on its own: one that fails gets its
        error in its place and the others are stored, except the later requests of its
        chain (``chains[i]``: one producer's stream), which get the same error unwritten."""
        now = int(self.clock() * 1000)
        topic = self.topic(name)
        keys = [NO_CHAIN] * len(requests) if chains is None else chains
        with topic.lock:
            group = GroupWrite(self.db, topic)
            written = until_failed(
                [(raw, part, chain) for (raw, part), chain in zip(requests, keys, strict=True)],
                keys,
                lambda rpc: self._stage_request(topic, group, now, partition, *rpc),
            )
            group.write()
            stored = any(isinstance(w, StagedAppend) and w.runs and not w.error for w in written)
            ticket = self.group_commit.ticket() if self.fsync and stored else None
            return [self._outcome(topic, w, ticket) for w in written]

    def _outcome(
        self, topic: LedgerTopic, w: StagedAppend | PendingAppend | Exception, ticket: int | None
    ) -> PendingAppend | Exception:
        if not isinstance(w, StagedAppend):
            return w
        return w.error or self.appended(topic, w.before, w.runs, ticket=ticket)

    def _stage_request(
        self,
        topic: LedgerTopic,
        group: GroupWrite,
        now: int,
        partition: int,
        request: bytes,
        part: SpanningPart | None,
        chain: int,
    ) -> StagedAppend | PendingAppend:
        """One request's batches staged in its group (under the topic's lock): the ledger
        current before and the runs; or the first append of a part stored before."""
        if topic.deleted:
            raise TopicNotFound(f"topic {topic.name!r} does not exist", topic=topic.name)
        if part is not None:
            if group.holds(part):
                group.write()  # its first send is in this group: stored, then found
            if (kept := self.spanning_parts.kept(topic, part)) is not None:
                return kept  # a repeat of a part stored before: its first ids
        if chain in group.failed:  # the group's write failed before, under this stream
            raise group.failed[chain]
        undo = topic.undo_point()
        before = topic.current
        staged = Staged()
        try:
            runs = build_append(topic, request, now, self._allocate_ledger, staged, partition)
            if part is not None:
                self.spanning_parts.keep(staged, topic, part, runs)
        except BaseException:
            topic.rollback(undo)  # memory must not run ahead of disk
            raise
        member = StagedAppend(before, runs)
        group.stage(staged, member, chain, part)
        return member

    def appended(
        self,
        topic: LedgerTopic,
        before: LedgerMeta | None,
        runs: list[IdRun],
        ticket: int | None = None,
    ) -> PendingAppend:
        """The pending append of ``runs`` just written (under the topic's lock): indexed,
        and visible at once or once the group commit syncs it (``ticket``: one taken
        after this write, shared with the rest of its group; None: take one now)."""
        if not runs:
            return PendingAppend(self, topic, [], 0)
        self.key_indexer.appended(before, runs)
        if self.fsync:
            ticket = self.group_commit.ticket() if ticket is None else ticket
            return PendingAppend(self, topic, runs, ticket)
        lid, first, count = runs[-1]
        topic.confirm(MessageId(lid, first + count - 1))
        return PendingAppend(self, topic, runs, 0)
