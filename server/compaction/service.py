"""Compaction for the admin API, the threshold monitor and the metrics endpoint.

``CompactionService`` starts and books the runs: LEDGER topics run the TwoPhaseCompactor in
a compaction worker process (``compactor.two_phase.worker_runs``), SEGMENTED topics a
LogCleaner pass (``compaction.cleaner_passes``); it persists their status, runs Pulsar's
threshold monitor and hands each run a ``LocalRunControl`` that ``compaction.insight``
reads. Its rules (one run a topic, the server-wide cap, previews, fault injection) are in
docs/architecture.md ("The compaction room").
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from compactlog.compactor.progress import LocalRunControl, RunCancelled
from compactlog.compactor.two_phase import CompactionRun
from compactlog.compactor.two_phase.faults import fault_from_env
from compactlog.compactor.two_phase.ledger_adapter import backlog_bytes
from compactlog.compactor.two_phase.worker_runs import WorkerCompactions
from compactlog.errors import (
    CompactionRunning,
    CompactlogError,
    ShuttingDown,
    Unimplemented,
    WrongTopicKind,
)
from compactlog.server.admin.service import Compactions
from compactlog.server.broker import Broker
from compactlog.server.compaction import insight
from compactlog.server.compaction.cleaner_passes import (
    CleanerPass,
    SegmentCleaner,
    cleaner_run,
    cleaner_status,
)
from compactlog.server.compaction.metrics import CompactionMetrics
from compactlog.server.compaction.status import CompactionState, CompactionStatus
from compactlog.server.metrics import Metrics
from compactlog.server.periodic import Periodic
from compactlog.storage.config import ServerSettings
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb

log = logging.getLogger(__name__)

SHUTDOWN_WAIT_S = 10.0


@dataclass
class _Slot:
    """One topic's status and run bookkeeping; ``owner`` tells a re-created topic apart."""

    owner: object
    status: CompactionStatus
    idle: threading.Event = field(default_factory=threading.Event)
    control: LocalRunControl | None = None  # the current (or last) run's


class CompactionService:
    """Implements ``admin.service.Compactions`` for both topic kinds."""

    def __init__(
        self,
        broker: Broker,
        max_concurrent: int,
        metrics: Metrics,
        runs: WorkerCompactions,
        cleaner: SegmentCleaner | None = None,
    ) -> None:
        self.broker = broker
        self.store = broker.ledgers
        self.cleaner = cleaner
        self.runs = runs
        self.metrics = CompactionMetrics(metrics, self._last_runs, broker)
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}
        self._cap = threading.BoundedSemaphore(max_concurrent)
        self._closing = False
        for name in self.store.topic_names():  # turns an interrupted RUNNING into ERROR
            self._slot(name)
        if cleaner is not None:
            cleaner.on_pass(self._cleaner_pass)
        broker.on_delete(self._forget)

    # ---- status ---------------------------------------------------------------------

    def _owner(self, name: str) -> object:
        if self.broker.kind(name) == TopicKind.LEDGER:
            return self.store.topic(name)
        return self.broker.segments.get_log(name)

    def _slot(self, name: str) -> _Slot:
        owner = self._owner(name)
        with self._lock:
            slot = self._slots.get(name)
            if slot is not None and slot.owner is owner:
                return slot
            status = CompactionStatus()
            if self.broker.kind(name) == TopicKind.LEDGER:
                saved = self.store.get_status(name)
                try:
                    status = CompactionStatus.from_json(saved)
                except ValueError as exc:
                    self.store.set_aside_status(name, str(exc))
                    saved, status = None, CompactionStatus()
                if saved and saved.get("state") != status.state.name:
                    self.store.put_status(name, status.to_json())
            slot = _Slot(owner, status)
            slot.idle.set()
            self._slots[name] = slot
            return slot

    def _set(self, name: str, slot: _Slot, status: CompactionStatus) -> None:
        """Move the state machine and persist it, unless the topic went meanwhile
        (DeleteTopic removes the blob under the same topic lock)."""
        with self._lock:
            slot.status = status
            topic = slot.owner
            if isinstance(topic, LedgerTopic):
                with topic.lock:
                    if not topic.deleted:
                        self.store.put_status(name, status.to_json())

    def status(self, topic: str) -> pb.CompactionStatus:
        slot = self._slot(topic)
        if self.broker.kind(topic) == TopicKind.SEGMENTED:
            status = slot.status
            if status.state == CompactionState.NOT_RUN and self.cleaner is not None:
                result = self.cleaner.last_result(topic)
                if result is not None:
                    status = cleaner_status(status.to(CompactionState.RUNNING), result)
            return status.to_pb()
        t = self.store.topic(topic)
        with t.lock:
            ledger_id = t.compacted_ledger_id()
            cursor = t.cursors.get(COMPACTION_SUBSCRIPTION)
            horizon = cursor.mark_delete if cursor is not None and ledger_id is not None else None
        return slot.status.to_pb(ledger_id, horizon)

    def _forget(self, topic: str) -> None:
        """A deleted topic: its slot and its metric series go."""
        with self._lock:
            self._slots.pop(topic, None)
        self.metrics.forget(topic)

    def _last_runs(self) -> list[tuple[str, CompactionRun]]:
        with self._lock:
            return [(n, s.status.last_run) for n, s in self._slots.items() if s.status.last_run]

    # ---- runs -----------------------------------------------------------------------

    def compact(self, topic: str, wait: bool) -> pb.CompactionStatus:
        segmented = self.broker.kind(topic) == TopicKind.SEGMENTED
        if segmented:
            self._cleaner().check_compacts(topic)  # NOT_COMPACTED as a status, not a run
        slot = self._slot(topic)
        with self._lock:
            if self._closing:
                raise ShuttingDown("the server is shutting down", topic=topic)
            if slot.status.state == CompactionState.RUNNING or (
                segmented and self._cleaner().busy(topic)  # a background pass holds it
            ):
                raise CompactionRunning(f"a compaction of {topic!r} is running", topic=topic)
            slot.idle.clear()
            slot.control = LocalRunControl()
            previous = slot.status
        try:
            self._set(topic, slot, previous.to(CompactionState.RUNNING))
        except CompactlogError:  # the status not stored (a full disk): no run, none left running
            with self._lock:
                slot.status = previous
            slot.idle.set()
            raise
        task = self._clean if segmented else self._run
        if wait or (not segmented and self._nothing_to_do(topic)):
            task(topic, slot)
        else:
            threading.Thread(
                target=task, args=(topic, slot), name=f"compaction-{topic}", daemon=True
            ).start()
        return self.status(topic)

    def _nothing_to_do(self, name: str) -> bool:
        t = self.store.topic(name)
        with t.lock:
            cursor = t.cursors.get(COMPACTION_SUBSCRIPTION)
            done = cursor.mark_delete if cursor and t.compacted_ledger_id() is not None else None
            return t.lac is None or t.lac == done

    def _run(self, topic: str, slot: _Slot) -> None:
        started = time.monotonic()
        control = slot.control
        try:
            if self._nothing_to_do(topic):
                result = self.runs.compact(topic, control or LocalRunControl())
            else:
                with insight.cap_slot(self._cap, control):
                    result = self.runs.compact(topic, control or LocalRunControl())
        except RunCancelled:
            self._finish(topic, slot, slot.status.to(CompactionState.CANCELLED))
            return
        except Exception as exc:
            if not isinstance(exc, CompactlogError):
                log.exception("compaction of %s failed", topic)
            error = str(exc) if isinstance(exc, CompactlogError) else f"{type(exc).__name__}: {exc}"
            log.warning("compaction of %s failed: %s", topic, error)
            self.metrics.failed(topic, time.monotonic() - started)
            self._finish(topic, slot, slot.status.to(CompactionState.ERROR, error=error))
            return
        if not result.committed:  # nothing to do: keep the figures of the last real run
            self._finish(topic, slot, slot.status.to(CompactionState.SUCCESS))
            return
        self.metrics.succeeded_run(topic, result.run)
        self._finish(topic, slot, slot.status.to(CompactionState.SUCCESS, run=result.run))

    def record_outside_run(self, topic: str, run: CompactionRun | None, error: str = "") -> None:
        """An outside run (the Spark engine) committed (``run``) or failed (``error``).
        While a local run of the topic is RUNNING only the figures are kept: its own
        outcome (a CommitConflict if the outside run won) follows."""
        try:
            slot = self._slot(topic)
        except CompactlogError:  # deleted meanwhile
            return
        with self._lock:
            if slot.status.state == CompactionState.RUNNING:
                if run is not None:
                    slot.status = dataclasses.replace(slot.status, last_run=run)
                return
            status = slot.status.to(CompactionState.RUNNING)
        if run is not None:
            self.metrics.succeeded_run(topic, run)
            self._set(topic, slot, status.to(CompactionState.SUCCESS, run=run))
        else:
            self._set(topic, slot, status.to(CompactionState.ERROR, error=error))

    def _cleaner(self) -> SegmentCleaner:
        if self.cleaner is None:
            raise Unimplemented(
                "compaction of SEGMENTED topics needs the log cleaner, not wired yet"
            )
        return self.cleaner

    def _clean(self, topic: str, slot: _Slot) -> None:
        control = slot.control
        cancelled = slot.status.to(CompactionState.CANCELLED)
        try:
            result = self._cleaner().clean_now(topic, control)
        except Exception as exc:
            if control is not None and control.cancelled:
                self._finish(topic, slot, cancelled)
                return
            self._finish(topic, slot, slot.status.to(CompactionState.ERROR, error=str(exc)))
            return
        if result.error and control is not None and control.cancelled:
            self._finish(topic, slot, cancelled)
            return
        self._finish(topic, slot, cleaner_status(slot.status, result))

    def _cleaner_pass(self, topic: str, result: CleanerPass) -> None:
        """Every LogCleaner pass, background or explicit, counts in the topic's figures."""
        if result.error:
            self.metrics.failed(topic, result.duration_ms / 1000.0)
        else:
            self.metrics.succeeded_run(topic, cleaner_run(result))

    def _finish(self, topic: str, slot: _Slot, status: CompactionStatus) -> None:
        try:
            self._set(topic, slot, status)
        except Exception:  # the store closed under a run at shutdown
            log.warning("could not record compaction status of %s", topic, exc_info=True)
            slot.status = status
        finally:
            slot.idle.set()

    # ---- control and insight (CONTRACT section 7; compaction.insight) ---------------

    def watch(self, topic: str, gone: Callable[[], bool]) -> Iterator[pb.CompactionProgress]:
        slot = self._slot(topic)
        with self._lock:
            control = slot.control
        return insight.watch(control, slot.idle, lambda: slot.status.state, gone)

    def cancel(self, topic: str) -> pb.CompactionStatus:
        slot = self._slot(topic)
        with self._lock:
            control = slot.control
        idle = slot.idle.is_set()
        if idle and self._abort_cleaner_pass(topic):  # a pass of the cleaner threads
            status = slot.status.to(CompactionState.RUNNING)
            self._set(topic, slot, status.to(CompactionState.CANCELLED))
        else:
            insight.cancel(topic, None if idle else control, slot.idle)
        return self.status(topic)

    def _abort_cleaner_pass(self, topic: str) -> bool:
        segmented = self.broker.kind(topic) == TopicKind.SEGMENTED
        return segmented and self.cleaner is not None and self.cleaner.abort(topic)

    def preview(self, topic: str, control: LocalRunControl) -> pb.CompactionRun:
        """The figures of a run started now, from a worker either way: a LEDGER topic's
        reads (``worker_reads``), a SEGMENTED topic's dry cleaner pass."""
        with insight.caller_gone(topic, "preview"):
            if self.broker.kind(topic) == TopicKind.SEGMENTED:
                return cleaner_run(self._cleaner().preview(topic, control)).to_pb()
            return self.runs.preview(topic, control).to_pb()

    def verify(self, topic: str, control: LocalRunControl) -> pb.VerifyCompactionResponse:
        topic = self._ledger_topic(topic, "verification")
        with insight.caller_gone(topic, "verification"):
            return insight.verification_pb(*self.runs.verify(topic, control))

    def _ledger_topic(self, topic: str, what: str) -> str:
        if self.broker.kind(topic) != TopicKind.LEDGER:
            raise WrongTopicKind(
                f"compaction {what} is for LEDGER topics (it reads the raw history they keep); "
                f"{topic!r} is SEGMENTED",
                topic=topic,
                kind="SEGMENTED",
            )
        return topic

    # ---- threshold monitor ----------------------------------------------------------

    def check_thresholds(self) -> None:
        """Compact each topic whose compaction backlog is over its threshold."""
        for name in self.store.topic_names():
            try:
                topic = self.store.topic(name)
                threshold = topic.config.compaction_threshold_bytes
                if threshold <= 0:
                    continue
                if COMPACTION_SUBSCRIPTION not in topic.cursors:
                    self.store.open_cursor(name, COMPACTION_SUBSCRIPTION)
                if self._slot(name).status.state == CompactionState.RUNNING:
                    continue
                backlog = backlog_bytes(self.store, name)
                if backlog > threshold:
                    log.info(
                        "compaction backlog of %s is %d bytes, over %d: compacting",
                        name,
                        backlog,
                        threshold,
                    )
                    self.compact(name, wait=False)
            except CompactlogError as exc:  # deleted meanwhile, already running
                log.debug("threshold check of %s: %s", name, exc)

    def close(self) -> None:
        """Refuse new runs and give running ones a moment to finish before the store closes."""
        with self._lock:
            self._closing = True
            slots = list(self._slots.values())
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        for slot in slots:
            slot.idle.wait(max(0.0, deadline - time.monotonic()))


def make_compactions(broker: Broker, settings: ServerSettings, metrics: Metrics) -> Compactions:
    """Wire the service into the server: worker runs, monitor thread, cleaner routing,
    shutdown hook."""
    cleaner: SegmentCleaner | None = getattr(broker, "cleaner", None)
    runs = WorkerCompactions(
        broker.ledgers,
        broker.workers,
        broker.work_dir,
        settings.compaction_phase_one_memory_bytes,
        settings.log_cleaner_io_max_bytes_per_second,
        fault_from_env(),
        settings.worker_threads,
    )
    service = CompactionService(
        broker,
        settings.compaction_max_concurrent,
        metrics,
        runs,
        cleaner,
    )
    monitor = Periodic(
        "compaction-monitor",
        settings.compaction_monitor_interval_ms / 1000.0,
        service.check_thresholds,
    ).start()
    broker.on_close(service.close)
    broker.on_close(monitor.stop)
    return service
