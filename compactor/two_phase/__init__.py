"""Pulsar-style compaction of LEDGER topics: the TwoPhaseCompactor and its storage
interfaces (an in-process adapter over the ledger store and an in-memory twin)."""

from compactlog.compactor.two_phase.compactor import (
    ENGINE,
    FAULT_POINTS,
    CompactionResult,
    CompactionRun,
    FaultHook,
    TwoPhaseCompactor,
)
from compactlog.compactor.two_phase.phase_one import PhaseOneMemoryExceeded
from compactlog.compactor.two_phase.storage import CompactionInput, CompactionStorage, Segment

__all__ = [
    "ENGINE",
    "FAULT_POINTS",
    "CompactionInput",
    "CompactionResult",
    "CompactionRun",
    "CompactionStorage",
    "FaultHook",
    "PhaseOneMemoryExceeded",
    "Segment",
    "TwoPhaseCompactor",
]
