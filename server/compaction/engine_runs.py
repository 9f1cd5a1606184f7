"""Compaction runs driven from outside the server (the Spark engine), Pulsar's standalone
compactor in shape: the run plans and reads through us, writes a new compacted ledger
under a *lease*, and commits ``(ledger, horizon)`` through us.

Synchronous and free of gRPC (the ``CompactionEngine`` servicer only translates), it holds
the three checks the safety of such runs rests on: leased ledgers only, a commit only
over the state the run began from (``CommitConflict``), and ``sweep`` for lapsed leases;
they are spelled out in docs/architecture.md ("The compaction room").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from google.protobuf.message import DecodeError

from compactlog.compactor.two_phase import CompactionInput, CompactionRun, Segment
from compactlog.compactor.two_phase.compactor import key_and_flags
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.storage import KeyEntry, NewEntry, tail_segments
from compactlog.errors import CommitConflict, MalformedRequest, TopicNotFound, WrongTopicKind
from compactlog.server.broker import Broker
from compactlog.server.periodic import Periodic
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, TopicKind
from compactlog.storage.views import compacted_state

log = logging.getLogger(__name__)

DEFAULT_LEASE_MS = 60_000
MAX_LEASE_MS = 3_600_000
MIN_LEASE_MS = 100
SWEEP_INTERVAL_S = 1.0


@runtime_checkable
class RunRecorder(Protocol):
    """Where outside runs report their outcome (``CompactionService`` implements it)."""

    def record_outside_run(self, topic: str, run: CompactionRun | None, error: str = "") -> None:
        """Record a finished run (``run``) or a failed one (``error``)."""


class _NoRecorder:
    def record_outside_run(self, topic: str, run: CompactionRun | None, error: str = "") -> None:
        pass


def _entry_key(ledger_id: int, entry_id: int, data: bytes) -> tuple[bytes | None, int]:
    """Key and flags of an entry an outside run sends: a ``Message``, or refused."""
    try:
        return key_and_flags(data)
    except DecodeError as exc:
        raise MalformedRequest(
            f"entry {entry_id} for ledger {ledger_id} is not a Message: {exc}",
            ledger=ledger_id,
            entry=entry_id,
        ) from None


@dataclass
class Lease:
    topic: str
    ledger_id: int
    lease_s: float
    expires: float
    incarnation: int = 0  # of the topic the ledger was made for (a re-created one differs)
    sealed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class Layout:
    """What a parallel reader plans from (``TopicLayout``)."""

    kind: TopicKind
    raw_view: tuple[Segment, ...] = ()
    compacted_view: tuple[Segment, ...] = ()
    compacted_ledger_id: int | None = None
    horizon: MessageId | None = None
    log_start_offset: int = 0
    log_end_offset: int = 0
    pending: tuple[tuple[int, int, int], ...] = ()  # ledger id, entries, lease left ms
    retain_null_key: bool = False


class OutsideRuns:
    """Reads, lease-held ledgers and guarded commits for runs outside this process."""

    def __init__(
        self,
        store: LedgerStore,
        kind_of: Callable[[str], TopicKind],
        segment_bounds: Callable[[str], tuple[int, int]],
        recorder: RunRecorder | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.kind_of = kind_of
        self.segment_bounds = segment_bounds
        self.recorder: RunRecorder = recorder or _NoRecorder()
        self.clock = clock
        self.local = LedgerStoreCompactionStorage(store)
        self._lock = threading.Lock()
        self._leases: dict[int, Lease] = {}

    # ---- planning -------------------------------------------------------------------

    def _ledger_topic(self, topic: str) -> None:
        if self.kind_of(topic) != TopicKind.LEDGER:
            raise WrongTopicKind(
                f"topic {topic!r} is SEGMENTED: it is compacted in place by the LogCleaner, "
                "not by the two-phase compactor",
                topic=topic,
                kind="SEGMENTED",
            )

    def layout(self, topic: str) -> Layout:
        kind = self.kind_of(topic)
        if kind == TopicKind.SEGMENTED:
            start, end = self.segment_bounds(topic)
            return Layout(kind, log_start_offset=start, log_end_offset=end)
        t = self.store.topic(topic)
        with t.lock:
            lac = t.lac
            ledgers = [(led.ledger_id, led.entries) for led in t.ledgers]
            retain = t.config.compaction_retain_null_key
        state = compacted_state(self.store, topic)
        raw: list[Segment] = []
        if lac is not None:
            raw = tail_segments(ledgers, None, lac)
        compacted = raw
        if state is not None and lac is not None:
            head = [Segment(state.ledger_id, 0, state.entries - 1, True)] if state.entries else []
            tail = tail_segments(ledgers, state.horizon, lac) if lac > state.horizon else []
            compacted = head + tail
        now = self.clock()
        with self._lock:
            pending = tuple(
                (lease.ledger_id, self._entries(lease.ledger_id), int((lease.expires - now) * 1000))
                for lease in self._leases.values()
                if lease.topic == topic
            )
        return Layout(
            kind,
            tuple(raw),
            tuple(compacted),
            state.ledger_id if state is not None else None,
            state.horizon if state is not None else None,
            pending=pending,
            retain_null_key=retain,
        )

    def _entries(self, ledger_id: int) -> int:
        meta = self.store.ledger(ledger_id)
        return meta.entries if meta is not None else 0

    def begin(self, topic: str) -> CompactionInput:
        self._ledger_topic(topic)
        return self.local.begin(topic)

    # ---- reads ----------------------------------------------------------------------

    def _check_range(self, topic: str, segment: Segment) -> None:
        self._ledger_topic(topic)
        meta = self.store.ledger(segment.ledger_id)
        if meta is None or meta.topic != topic:
            raise TopicNotFound(
                f"ledger {segment.ledger_id} of topic {topic!r} does not exist",
                topic=topic,
                ledger=segment.ledger_id,
            )
        if segment.first_entry > segment.last_entry or segment.last_entry >= meta.entries:
            raise MalformedRequest(
                f"entries {segment.first_entry}..{segment.last_entry} are outside ledger "
                f"{segment.ledger_id} (0..{meta.entries - 1})",
                topic=topic,
                ledger=segment.ledger_id,
            )

    def read_keys(self, topic: str, segment: Segment, reverse: bool) -> Iterator[KeyEntry]:
        self._check_range(topic, segment)
        return self.local.read_keys(segment, reverse)

    def read_entries(
        self, topic: str, segment: Segment, select: bytearray | None
    ) -> Iterator[tuple[int, bytes]]:
        self._check_range(topic, segment)
        if select is not None and len(select) != (segment.length + 7) >> 3:
            raise MalformedRequest(
                f"selection of {len(select)} bytes for {segment.length} entries",
                topic=topic,
                ledger=segment.ledger_id,
            )
        return self.local.read_entries(segment, select)

    # ---- the run's ledger -----------------------------------------------------------

    def create_ledger(self, topic: str, lease_ms: int) -> tuple[int, int]:
        self._ledger_topic(topic)
        lease_ms = min(max(lease_ms or DEFAULT_LEASE_MS, MIN_LEASE_MS), MAX_LEASE_MS)
        incarnation = self.store.topic(topic).incarnation
        ledger_id = self.local.create_ledger(topic)
        lease_s = lease_ms / 1000.0
        with self._lock:
            self._leases[ledger_id] = Lease(
                topic, ledger_id, lease_s, self.clock() + lease_s, incarnation
            )
        log.info(
            "outside compaction of %s writes ledger %d (lease %d ms)", topic, ledger_id, lease_ms
        )
        return ledger_id, lease_ms

    def _lease(self, ledger_id: int) -> Lease:
        with self._lock:
            lease = self._leases.get(ledger_id)
            if lease is None:
                raise MalformedRequest(
                    f"ledger {ledger_id} is not being written by an outside compaction "
                    "(never created here, committed, aborted, or its lease lapsed)",
                    ledger=ledger_id,
                )
            lease.expires = self.clock() + lease.lease_s
            return lease

    def append(self, ledger_id: int, first_entry_id: int, entries: Sequence[bytes]) -> int:
        """Append in entry order; return the ledger's entry count."""
        lease = self._lease(ledger_id)
        with lease.lock:
            if lease.sealed:
                raise MalformedRequest(f"ledger {ledger_id} is sealed", ledger=ledger_id)
            have = self._entries(ledger_id)
            if first_entry_id != have:
                raise MalformedRequest(
                    f"ledger {ledger_id} expects entry {have} next, got {first_entry_id}",
                    ledger=ledger_id,
                    entry=first_entry_id,
                )
            batch: list[NewEntry] = []
            for eid, data in enumerate(entries, first_entry_id):
                key, flags = _entry_key(ledger_id, eid, data)
                batch.append((eid, data, key, flags))
            self.local.append(ledger_id, batch)
            return have + len(batch)

    def seal(self, ledger_id: int, expected_entries: int) -> tuple[int, int]:
        lease = self._lease(ledger_id)
        with lease.lock:
            meta = self.store.ledger(ledger_id)
            assert meta is not None
            if meta.entries != expected_entries:
                raise MalformedRequest(
                    f"ledger {ledger_id} holds {meta.entries} entries, the run wrote "
                    f"{expected_entries}: not sealed",
                    ledger=ledger_id,
                )
            self.local.seal(ledger_id)
            lease.sealed = True
            return meta.entries, meta.bytes

    def commit(
        self,
        topic: str,
        ledger_id: int,
        horizon: MessageId,
        expected_previous: int | None,
        expected_horizon: MessageId | None,
        run: CompactionRun,
    ) -> None:
        """Commit like the local engine, if the run's base still holds; then delete the
        previous compacted ledger and record the run."""
        with self._lock:
            lease = self._leases.get(ledger_id)
            if lease is None or lease.topic != topic or not lease.sealed:
                raise MalformedRequest(
                    f"ledger {ledger_id} is not a sealed ledger of an outside compaction of "
                    f"{topic!r}",
                    topic=topic,
                    ledger=ledger_id,
                )
            del self._leases[ledger_id]  # from here on the sweeper leaves it alone
        try:
            t = self.store.topic(topic)
            with t.lock:
                cursor = t.cursors.get(COMPACTION_SUBSCRIPTION)
                current_horizon = cursor.mark_delete if cursor is not None else None
                if expected_previous is not None and current_horizon != expected_horizon:
                    raise CommitConflict(
                        f"horizon of {topic!r} is {current_horizon}, the run began from "
                        f"{expected_horizon}: another compaction committed first",
                        topic=topic,
                    )
                if (
                    t.lac is None
                    or horizon > t.lac
                    or (expected_horizon is not None and horizon <= expected_horizon)
                ):
                    raise MalformedRequest(
                        f"horizon {horizon} is not after {expected_horizon} and within {topic!r}",
                        topic=topic,
                        horizon=horizon,
                    )
                self.local.commit(topic, ledger_id, horizon, expected_previous, lease.incarnation)
        except Exception:
            self._delete(ledger_id)
            raise
        if expected_previous is not None:
            self._delete(expected_previous)
        self.recorder.record_outside_run(topic, run)

    def abort(self, topic: str, ledger_id: int, error: str) -> None:
        """Delete the run's ledger now (not at the lease's end) and record its error."""
        if ledger_id:
            with self._lock:
                lease = self._leases.get(ledger_id)
                if lease is not None and lease.topic == topic:
                    del self._leases[ledger_id]
                else:
                    lease = None
            if lease is not None:
                with lease.lock:
                    self._delete(ledger_id)
        if error:
            self.recorder.record_outside_run(topic, None, error)

    def sweep(self) -> list[int]:
        """Delete the ledgers whose lease lapsed; return their ids."""
        now = self.clock()
        with self._lock:
            lapsed = [lease for lease in self._leases.values() if lease.expires <= now]
            for lease in lapsed:
                del self._leases[lease.ledger_id]
        for lease in lapsed:
            log.warning(
                "lease of ledger %d (outside compaction of %s) lapsed: deleting it",
                lease.ledger_id,
                lease.topic,
            )
            with lease.lock:
                self._delete(lease.ledger_id)
            self.recorder.record_outside_run(
                lease.topic,
                None,
                f"outside compaction abandoned: lease of ledger {lease.ledger_id} lapsed",
            )
        return [lease.ledger_id for lease in lapsed]

    def _delete(self, ledger_id: int) -> None:
        try:
            self.local.delete_ledger(ledger_id)
        except Exception:  # start-up collects what is left
            log.warning("could not delete ledger %d", ledger_id, exc_info=True)


def make_outside_runs(broker: Broker, recorder: object) -> OutsideRuns:
    """Wire the registry into the server: lease sweeper thread, shutdown hook."""

    def bounds(name: str) -> tuple[int, int]:
        return broker.segments.log_start_offset(name), broker.segments.log_end_offset(name)

    runs = OutsideRuns(
        broker.ledgers,
        broker.kind,
        bounds,
        recorder if isinstance(recorder, RunRecorder) else None,
    )

    def sweep() -> None:
        runs.sweep()

    sweeper = Periodic("outside-compaction-leases", SWEEP_INTERVAL_S, sweep).start()
    broker.on_close(sweeper.stop)
    return runs
