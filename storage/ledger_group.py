"""One RocksDB write for a writer's group of publish requests to one LEDGER topic.

rocksdict holds the interpreter for the whole of a write, so a group of requests
written one ``db.write`` each pays the write's fixed cost once a request while the event
loop waits. Here each request's batches are built into a ``Staged`` of their own (taken
into the group's ``Batch`` only once the request is whole: a request failing half-way
leaves nothing in it) and the group is written once, before its group-commit ticket is
taken. A write that fails fails every request staged in it and rolls the topic's ledger
state back to before them; the requests that failed on their own keep their own errors.
A marked part already staged in the group is written before its repeat is looked up, so
a part is stored at most once (``storage/ledger_spanning.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from compactlog.storage import keys
from compactlog.storage.chains import NO_CHAIN
from compactlog.storage.codec import LedgerMeta
from compactlog.storage.ledger_append import IdRun
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.rocks import Batch, RocksDB, Staged
from compactlog.storage.spanning import SpanningPart


@dataclass(slots=True)
class StagedAppend:
    """One request staged in a group: the ledger current before it and its runs, or the
    error its group's write failed with."""

    before: LedgerMeta | None
    runs: list[IdRun]
    error: Exception | None = None


class GroupWrite:
    """The staged requests of one group (under the topic's lock), written by ``write``."""

    def __init__(self, db: RocksDB, topic: LedgerTopic) -> None:
        self.db, self.topic = db, topic
        self._start()

    def _start(self) -> None:
        self.batch = Batch()
        self.undo = self.topic.undo_point()
        self.members: list[StagedAppend] = []
        self.parts: set[bytes] = set()
        self.failed: dict[int, Exception] = {}  # chain -> the write error that stopped it
        self._chains: list[int] = []

    def stage(
        self, staged: Staged, member: StagedAppend, chain: int, part: SpanningPart | None
    ) -> None:
        """Add a whole request's writes to the group."""
        self.batch.take(staged)
        self.members.append(member)
        self._chains.append(chain)
        if part is not None:
            self.parts.add(keys.spanning_part_key(part.txid, self.topic.name))

    def holds(self, part: SpanningPart) -> bool:
        return keys.spanning_part_key(part.txid, self.topic.name) in self.parts

    def write(self) -> None:
        """Write what is staged as one RocksDB write; on failure every staged request gets
        the error (and its chain stops), and the topic forgets them."""
        failed = self.failed
        if self.batch.ops:
            try:
                self.db.write(self.batch)
            except Exception as exc:
                self.topic.rollback(self.undo)  # memory must not run ahead of disk
                for member, chain in zip(self.members, self._chains, strict=True):
                    member.error = exc
                    if chain != NO_CHAIN:
                        failed.setdefault(chain, exc)
        self._start()
        self.failed = failed
