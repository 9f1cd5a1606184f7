"""Partition-set changes made whole: a create, grow or delete of a partitioned topic's
partitions either happens entirely or not at all, also under kill -9.

The change is kept first (``storage.partitioned_topics``, ``"pending"``), then each
partition this store holds is made or deleted, then one write records the outcome and
drops the change. A crash anywhere in between is rolled forward at the next start
(``finish_pending``, one line logged per change) or by the next admin call on the name;
a partition made or deleted twice is skipped. A failure of a file operation half-way
under a living server undoes a create or a grow (its new partitions deleted, the old
record kept) and leaves a delete pending to finish. The named steps are the test-only
crash points of ``compactlog.crash_points`` (docs/operations.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from compactlog.crash_points import reached
from compactlog.errors import CompactlogError
from compactlog.partitioner import partition_name
from compactlog.server.broker import Broker
from compactlog.storage.partitioned_topics import Op, PartitionedTopic, PendingChange

log = logging.getLogger("compactlog.server.admin")

Crash = Callable[[str], None]
_CALLS = {Op.CREATE: "CreateTopic", Op.GROW: "AddPartitions", Op.DELETE: "DeleteTopic"}


def _no_crash(_point: str) -> None:
    """At start: a roll forward never stops at a crash point (a restarted shard keeps
    its environment)."""


class PartitionChanges:
    """Makes the pending changes of one store's partitioned topics (module docstring);
    every call under ``broker.namespace_lock``."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def apply(self, change: PendingChange, before: PartitionedTopic | None) -> None:
        """Keep ``change``, make it, record its outcome; ``before``: the record it
        replaces (undone back to it when a file operation fails half-way)."""
        op = change.op.value
        self.broker.partitioned.begin(change)
        reached(f"{op}_after_intent")
        try:
            self._make(change, _first(change, before), reached)
        except CompactlogError:
            if change.op is not Op.DELETE:
                self._undo(change, before)
            raise
        reached(f"{op}_before_record")
        self.broker.partitioned.finish(change.name, change.outcome)

    def finish(self, change: PendingChange, crash: Crash = _no_crash) -> None:
        """Roll ``change`` forward: the partitions still to make or delete, then its
        outcome recorded."""
        before = self.broker.partitioned.get(change.name)
        self._make(change, _first(change, before), crash)
        self.broker.partitioned.finish(change.name, change.outcome)

    def finish_pending(self) -> list[PendingChange]:
        """At start: every change a crash cut short, rolled forward; those finished. One
        that fails again (a full disk, say) is logged and stays pending for the next
        admin call on its name or the next start."""
        done = []
        for change in self.broker.partitioned.pending():
            try:
                self.finish(change)
            except CompactlogError as exc:
                log.error("%s still cut short (finished later): %s", _said(change), exc)
                continue
            log.warning("%s finished at start", _said(change))
            done.append(change)
        return done

    def _make(self, change: PendingChange, first: int, crash: Crash) -> None:
        """Each partition ``first`` .. of ``change`` this store holds made (or deleted);
        those already so are skipped."""
        broker = self.broker
        names = [partition_name(change.name, i) for i in range(first, change.partitions)]
        made = 0
        for part in filter(broker.holds, names):
            if broker.has_name(part) == (change.op is not Op.DELETE):
                continue
            if change.op is Op.DELETE:
                broker.delete_topic(part)
            else:
                broker.create_topic(part, change.kind, change.config)
            made += 1
            if made == 1:
                crash(f"{change.op.value}_after_first_partition")

    def _undo(self, change: PendingChange, before: PartitionedTopic | None) -> None:
        """A create or grow that failed half-way: its new partitions deleted, ``before``
        recorded again. When the undo fails too, the change stays pending (rolled
        forward later)."""
        undo = PendingChange(change.name, Op.DELETE, change.partitions, change.kind)
        try:
            self._make(undo, _first(change, before), _no_crash)
            self.broker.partitioned.finish(change.name, before)
        except CompactlogError as exc:
            log.error("%s failed and could not be undone (finished later): %s", _said(change), exc)


def _first(change: PendingChange, before: PartitionedTopic | None) -> int:
    """The first partition ``change`` touches: a grow's first new one, else 0."""
    if change.op is Op.GROW and before is not None:
        return before.partitions
    return 0


def _said(change: PendingChange) -> str:
    what = "deleting" if change.op is Op.DELETE else "making"
    return (
        f"partitioned topic {change.name!r}: {_CALLS[change.op]} cut short "
        f"({what} {change.partitions} partitions)"
    )
