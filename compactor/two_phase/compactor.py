"""Pulsar's TwoPhaseCompactor over ``CompactionStorage``.

One run::

    begin      snapshot: previous compacted ledger + raw after its horizon, up to the lac
    phase one  keys only: the latest position of each key in an offset map (``phase_one``);
               if the map filled, the run covers the input up to where it stopped
    phase two  winners' bytes in id order (they carry their ids) into a new ledger
    commit     seal; one atomic write: cursor mark-delete = horizon, CompactedTopicLedger =
               new; delete the previous compacted ledger (a crash before that leaves an
               orphan that start-up collects)

A crash before the commit leaves the old view, after it the new one, never a mix.
``fault`` is called at each named step (``FAULT_POINTS``) so tests can crash or pause a
run exactly there. A ``RunControl`` gets the run's progress per phase and may cancel it
(``RunCancelled``) anywhere before the commit write: the new ledger is deleted, the old
view stays. ``preview`` runs both phases' reads and writes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from compactlog.compactor.progress import COMMIT, PHASE_TWO, NoControl, Progress, RunControl
from compactlog.compactor.two_phase.phase_one import PhaseOneResult, find_winners
from compactlog.compactor.two_phase.phase_two import (
    PhaseTwoMeter,
    WinnerCopier,
    winners_in_order,
)
from compactlog.compactor.two_phase.storage import (
    BatchStorage,
    CompactionInput,
    CompactionStorage,
    NewEntry,
)
from compactlog.storage.codec import key_flags
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

log = logging.getLogger(__name__)

ENGINE = "local"
APPEND_BATCH = 4096  # winners per ledger append (one RocksDB write batch)
FAULT_POINTS = (
    "after_phase_one",
    "after_create",
    "after_append",
    "after_seal",
    "after_commit",
    "after_delete",
)

FaultHook = Callable[[str], None]
# Phase one as a strategy: the local scan (``find_winners``) or the Spark aggregation.
PhaseOne = Callable[[CompactionStorage, CompactionInput, int, RunControl], PhaseOneResult]


def _no_fault(point: str) -> None:
    pass


@dataclass(frozen=True)
class CompactionRun:
    """The figures of one run (CONTRACT ``CompactionRun``) plus phase-one measurements."""

    read: int = 0
    kept: int = 0
    removed: int = 0
    tombstones: int = 0
    keyless_dropped: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    duration_ms: int = 0
    engine: str = ENGINE
    distinct_keys: int = 0
    phase_one_peak_bytes: int = 0
    phase_one_ms: int = 0
    phase_two_ms: int = 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def to_pb(self) -> pb.CompactionRun:
        """The contract's figures (the phase-one measurements stay server-side)."""
        return pb.CompactionRun(
            read=self.read,
            kept=self.kept,
            removed=self.removed,
            tombstones=self.tombstones,
            keyless_dropped=self.keyless_dropped,
            bytes_in=self.bytes_in,
            bytes_out=self.bytes_out,
            duration_ms=self.duration_ms,
            engine=self.engine,
        )

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> CompactionRun:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})  # type: ignore[arg-type]


@dataclass(frozen=True)
class CompactionResult:
    run: CompactionRun
    ledger_id: int | None  # the compacted ledger after the run (None: still none)
    horizon: MessageId | None
    previous_ledger: int | None = None
    committed: bool = field(default=False)  # False: there was nothing to do


def key_and_flags(data: bytes) -> tuple[bytes | None, int]:
    msg = pb.Message.FromString(data)
    key = msg.key if msg.HasField("key") else None
    return key, key_flags(key, msg.value if msg.HasField("value") else None)


class TwoPhaseCompactor:
    """Compacts one topic per ``compact`` call; one instance may serve many topics."""

    def __init__(
        self,
        storage: CompactionStorage,
        phase_one_memory_bytes: int,
        fault: FaultHook = _no_fault,
        phase_one: PhaseOne = find_winners,
        engine: str = ENGINE,
    ) -> None:
        self.storage = storage
        self.phase_one_memory_bytes = phase_one_memory_bytes
        self.fault = fault
        self.phase_one = phase_one
        self.engine = engine

    def compact(self, topic: str, control: RunControl | None = None) -> CompactionResult:
        control = control or NoControl()
        started = time.monotonic()
        inp = self.storage.begin(topic)
        if inp.nothing_to_do:
            return CompactionResult(
                CompactionRun(), inp.previous_ledger, inp.previous_horizon, inp.previous_ledger
            )
        inp, winners = self._phase_one(inp, control)
        assert inp.horizon is not None
        phase_one_done = time.monotonic()
        self.fault("after_phase_one")
        control.report(Progress(PHASE_TWO, 0, inp.entries, winners.bytes_in))
        control.check()
        ledger_id = self.storage.create_ledger(topic)
        try:
            self.fault("after_create")
            meter = PhaseTwoMeter(control, inp.entries, bytes_read=winners.bytes_in)
            self._copy_winners(ledger_id, inp, winners, meter)
            control.report(Progress(COMMIT, 0, 1, meter.bytes_read, meter.bytes_written))
            control.check()
            self.storage.seal(ledger_id)
            self.fault("after_seal")
            control.check()  # the last moment a cancel can stop the run
            self.storage.commit(topic, ledger_id, inp.horizon, inp.previous_ledger, inp.incarnation)
        except Exception:
            self._discard(ledger_id)
            raise
        self.fault("after_commit")
        if inp.previous_ledger is not None:
            self.storage.delete_ledger(inp.previous_ledger)
        self.fault("after_delete")
        control.report(Progress(COMMIT, 1, 1, meter.bytes_read, meter.bytes_written))
        run = self._figures(winners, meter, meter.bytes_written, started, phase_one_done)
        log.info(
            "compacted %s: read %d kept %d into ledger %d, horizon %s in %d ms",
            topic,
            run.read,
            run.kept,
            ledger_id,
            inp.horizon,
            run.duration_ms,
        )
        return CompactionResult(run, ledger_id, inp.horizon, inp.previous_ledger, True)

    def preview(self, inp: CompactionInput, control: RunControl | None = None) -> CompactionRun:
        """The figures a run over ``inp`` would have: both phases' reads, no write."""
        control = control or NoControl()
        started = time.monotonic()
        if inp.nothing_to_do:
            return CompactionRun(engine=self.engine)
        inp, winners = self._phase_one(inp, control)
        phase_one_done = time.monotonic()
        meter = PhaseTwoMeter(control, inp.entries, bytes_read=winners.bytes_in)
        bytes_out = sum(map(len, winners_in_order(self.storage, inp, winners, meter)))
        return self._figures(winners, meter, bytes_out, started, phase_one_done)

    def _phase_one(
        self, inp: CompactionInput, control: RunControl
    ) -> tuple[CompactionInput, PhaseOneResult]:
        """Phase one, and the input cut where it stopped when its map filled."""
        winners = self.phase_one(self.storage, inp, self.phase_one_memory_bytes, control)
        if winners.covered is not None:
            cut = inp.cut(winners.covered)
            log.info(
                "compaction of %s: phase one's offset map is full after %d of %d entries "
                "(%d keys); this run covers up to %s, the next goes on from there",
                inp.topic,
                winners.covered,
                inp.entries,
                winners.distinct_keys,
                cut.horizon,
            )
            inp = cut
        return inp, winners

    def _figures(
        self,
        winners: PhaseOneResult,
        meter: PhaseTwoMeter,
        bytes_out: int,
        started: float,
        phase_one_done: float,
    ) -> CompactionRun:
        """The run's figures; tombstones kept for readers count as kept, not removed."""
        done = time.monotonic()
        kept = winners.kept + meter.tombstones_kept
        return CompactionRun(
            read=winners.read,
            kept=kept,
            removed=winners.read - kept,
            tombstones=winners.tombstones - meter.tombstones_kept,
            keyless_dropped=winners.keyless_dropped,
            bytes_in=winners.bytes_in,
            bytes_out=bytes_out,
            duration_ms=int((done - started) * 1000),
            engine=self.engine,
            distinct_keys=winners.distinct_keys,
            phase_one_peak_bytes=winners.peak_bytes,
            phase_one_ms=int((phase_one_done - started) * 1000),
            phase_two_ms=int((done - phase_one_done) * 1000),
        )

    def _copy_winners(
        self, ledger_id: int, inp: CompactionInput, winners: PhaseOneResult, meter: PhaseTwoMeter
    ) -> None:
        """Phase two: append the winners verbatim, in id order."""
        storage = self.storage
        # A run that may keep tombstones asks each winning one (winners_in_order).
        if isinstance(storage, BatchStorage) and inp.tombstones is None:
            copier = WinnerCopier(storage, ledger_id, APPEND_BATCH)
            copier.on_first_append = lambda: self.fault("after_append")
            copier.copy(inp, winners, meter)
            return
        batch: list[NewEntry] = []
        appended = False
        for out_id, data in enumerate(winners_in_order(storage, inp, winners, meter)):
            key, flags = key_and_flags(data)
            batch.append((out_id, data, key, flags))
            meter.bytes_written += len(data)
            if len(batch) >= APPEND_BATCH:
                storage.append(ledger_id, batch)
                batch = []
                if not appended:
                    appended = True
                    self.fault("after_append")
        if batch:
            storage.append(ledger_id, batch)
            if not appended:
                self.fault("after_append")

    def _discard(self, ledger_id: int) -> None:
        """Best effort: a failed run's ledger goes now, else at the next start-up."""
        try:
            self.storage.delete_ledger(ledger_id)
        except Exception:
            log.warning(
                "could not delete ledger %d of a failed compaction", ledger_id, exc_info=True
            )
