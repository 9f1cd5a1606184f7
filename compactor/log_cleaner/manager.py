"""LogCleanerManager: which topic to clean next, and the cleaning state of every topic.

Selection policy (Kafka's "filthiest log"): for every compacted topic that is neither being
cleaned, paused nor marked uncleanable, compute the dirty section ``[first dirty offset,
first uncleanable offset)`` — from the checkpoint to the active segment, cut short at the
first segment with a record younger than ``min.compaction.lag.ms`` — and its dirty ratio
``cleanable bytes / (clean + cleanable bytes)``. The topic with the highest ratio above
``min.cleanable.dirty.ratio`` wins; a topic whose oldest dirty record is older than
``max.compaction.lag.ms`` qualifies whatever its ratio.

States (checked transitions, one place)::

    None ──grab──▶ InProgress ──done──▶ None
    InProgress ──abort_and_pause──▶ Aborted(n) ──done──▶ Paused(n)
    None ──abort_and_pause──▶ Paused(1);  Paused(n) ──abort_and_pause──▶ Paused(n+1)
    Paused(n) ──resume──▶ Paused(n-1) … None
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass

from compactlog.compactor.log_cleaner.checkpoint import CleanerCheckpoint
from compactlog.compactor.log_cleaner.uncleanable import Uncleanable, fingerprint
from compactlog.errors import CompactionRunning
from compactlog.storage.config_keys import LONG_MAX
from compactlog.storage.segmented import Log, SegmentedLogManager


class IllegalCleanerState(RuntimeError):
    """A state transition the state machine does not allow (a bug in the caller)."""


class CleaningState(enum.Enum):
    IN_PROGRESS = "InProgress"
    ABORTED = "Aborted"
    PAUSED = "Paused"


@dataclass(frozen=True)
class _State:
    kind: CleaningState
    pauses: int = 0  # Paused(n); for Aborted, the pauses waiting to take effect

    def __str__(self) -> str:
        return f"{self.kind.value}({self.pauses})" if self.pauses else self.kind.value


@dataclass(frozen=True)
class LogToClean:
    name: str
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable_offsets(log: Log, checkpoint: int | None, now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, must compact now) for one log."""
    segments = log.segments
    start, end = log.log_start_offset, log.next_offset
    first_dirty = checkpoint if checkpoint is not None and start <= checkpoint <= end else start
    active_base = segments[-1].base_offset
    first_dirty = min(first_dirty, active_base)
    dirty = [s for i, s in enumerate(segments[:-1]) if segments[i + 1].base_offset > first_dirty]
    first_uncleanable = active_base
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for seg in dirty:
            if seg.largest_timestamp() > now_ms - lag:
                first_uncleanable = seg.base_offset
                break
    force = False
    max_lag = log.config.max_compaction_lag_ms
    if max_lag < LONG_MAX and dirty and dirty[0].first_timestamp is not None:
        force = now_ms - dirty[0].first_timestamp > max_lag
    return first_dirty, max(first_dirty, first_uncleanable), force


class LogCleanerManager:
    """Owns the checkpoint and the per-topic states; implements the storage's CleanerHooks."""

    def __init__(
        self, logs: SegmentedLogManager, checkpoint: CleanerCheckpoint, clock: Callable[[], float]
    ) -> None:
        self.logs = logs
        self.checkpoint = checkpoint
        self.clock = clock
        self._cond = threading.Condition()
        self._states: dict[str, _State] = {}
        self.uncleanable: dict[str, Uncleanable] = {}
        self.max_dirty_ratio = 0.0

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def state(self, name: str) -> str | None:
        with self._cond:
            st = self._states.get(name)
            return None if st is None else str(st)

    def log_to_clean(self, name: str, log: Log, now_ms: int) -> LogToClean:
        first_dirty, first_uncleanable, force = cleanable_offsets(
            log, self.checkpoint.get(name), now_ms
        )
        segs = log.segments
        clean = cleanable = 0
        for i, seg in enumerate(segs[:-1]):
            seg_end = segs[i + 1].base_offset
            if seg_end <= first_dirty:
                clean += seg.size
            elif seg.base_offset < first_uncleanable:
                cleanable += seg.size
        return LogToClean(name, log, first_dirty, first_uncleanable, clean, cleanable, force)

    def grab_filthiest(self) -> LogToClean | None:
        """Pick the dirtiest eligible topic and mark it InProgress."""
        now = self.now_ms()
        with self._cond:
            candidates: list[LogToClean] = []
            for name, log in self.logs.logs().items():
                if (
                    not log.config.compact
                    or name in self._states
                    or self._still_uncleanable(name, log)
                    or log.closed
                ):
                    continue
                candidates.append(self.log_to_clean(name, log, now))
            self.max_dirty_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            eligible = [
                c
                for c in candidates
                if c.cleanable_bytes > 0
                and (
                    c.needs_compaction_now
                    or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
                )
            ]
            if not eligible:
                return None
            chosen = max(eligible, key=lambda c: (c.needs_compaction_now, c.cleanable_ratio))
            self._states[chosen.name] = _State(CleaningState.IN_PROGRESS)
            return chosen

    def begin_forced(self, name: str) -> LogToClean:
        """Mark ``name`` InProgress for an explicit pass (dirty ratio ignored).

        The log is looked up under the same lock that marks the state, as
        ``grab_filthiest`` does: a deletion's ``abort_and_pause`` then either waits for
        this pass or is seen by it, and a pass never starts on a deleted topic's log
        after a new topic of that name took its place."""
        with self._cond:
            log = self.logs.get_log(name)
            st = self._states.get(name)
            if st is not None:
                raise CompactionRunning(f"cleaning of {name} is {st}", topic=name)
            self._states[name] = _State(CleaningState.IN_PROGRESS)
        return self.log_to_clean(name, log, self.now_ms())

    def is_aborted(self, name: str) -> bool:
        with self._cond:
            st = self._states.get(name)
            return st is not None and st.kind is CleaningState.ABORTED

    def done_cleaning(self, name: str, end_offset: int | None) -> None:
        """InProgress → None (checkpoint ``end_offset``); Aborted(n) → Paused(n)."""
        with self._cond:
            st = self._states.get(name)
            if st is None or st.kind is CleaningState.PAUSED:
                raise IllegalCleanerState(f"done_cleaning({name}) in state {st}")
            if st.kind is CleaningState.IN_PROGRESS:
                del self._states[name]
                if end_offset is not None and self.logs.has_topic(name):
                    self.checkpoint.update(name, end_offset)
            else:
                self._states[name] = _State(CleaningState.PAUSED, st.pauses)
            self._cond.notify_all()

    def abort_and_pause(self, name: str) -> None:
        """Stop any pass on ``name`` and keep new ones from starting until ``resume``."""
        with self._cond:
            st = self._states.get(name)
            if st is None:
                self._states[name] = _State(CleaningState.PAUSED, 1)
            elif st.kind is CleaningState.PAUSED:
                self._states[name] = _State(CleaningState.PAUSED, st.pauses + 1)
            else:
                self._states[name] = _State(CleaningState.ABORTED, st.pauses + 1)
                while (
                    s := self._states.get(name)
                ) is not None and s.kind is not CleaningState.PAUSED:
                    self._cond.wait()

    def resume(self, name: str) -> None:
        with self._cond:
            st = self._states.get(name)
            if st is None or st.kind is not CleaningState.PAUSED:
                raise IllegalCleanerState(f"resume({name}) in state {st}")
            if st.pauses <= 1:
                del self._states[name]
            else:
                self._states[name] = _State(CleaningState.PAUSED, st.pauses - 1)

    def forget(self, name: str) -> None:
        """The topic is gone: drop its state, uncleanable mark and checkpoint entry."""
        with self._cond:
            self._states.pop(name, None)
            self.uncleanable.pop(name, None)
        self.checkpoint.remove(name)

    def _still_uncleanable(self, name: str, log: Log) -> bool:
        mark = self.uncleanable.get(name)
        return mark is not None and mark.holds(log, self.clock())

    def uncleanable_cause(self, name: str) -> str | None:
        """Why ``name``'s log cannot be cleaned, while its mark holds (``uncleanable``)."""
        with self._cond:
            mark = self.uncleanable.get(name)
            if mark is None or not self.logs.has_topic(name):
                return None
            if not mark.damage:
                return None
            return mark.cause if mark.holds(self.logs.get_log(name), self.clock()) else None

    def mark_uncleanable(self, name: str, cause: str, damage: bool = True) -> bool:
        """Mark ``name`` uncleanable for ``cause`` (``damage`` False: held back by a disk
        fault, ``uncleanable.py``); True when it was not marked before."""
        with self._cond:
            if not self.logs.has_topic(name):
                return False
            log = self.logs.get_log(name)
            new = name not in self.uncleanable
            self.uncleanable[name] = Uncleanable(cause, self.clock(), fingerprint(log), damage)
            return new

    def uncleanable_count(self) -> int:
        """Logs marked for damage (Kafka's uncleanable-partitions-count)."""
        with self._cond:
            return sum(1 for mark in self.uncleanable.values() if mark.damage)

    def cleaned(self, name: str) -> None:
        """A pass of ``name`` went through: whatever was marked is gone."""
        with self._cond:
            self.uncleanable.pop(name, None)
