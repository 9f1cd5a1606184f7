"""The compaction state machine of one topic, persisted so it survives restarts.

::

    NOT_RUN ──▶ RUNNING ──▶ SUCCESS ────┐
                   ▲    ├─▶ ERROR ──────┤
                   │    └─▶ CANCELLED ──┤
                   └────────────────────┘

Every transition is checked (``IllegalTransition`` on any other). The status and the
last run's figures are a JSON blob per topic in the ledger store; a RUNNING blob found
at start-up belongs to a run the restart interrupted and becomes ERROR.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, cast

from compactlog.compactor.two_phase import CompactionRun
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

INTERRUPTED = "interrupted by restart"


class CompactionState(enum.IntEnum):
    """Values match ``compactlog.v1.CompactionStatus.State``."""

    NOT_RUN = 0
    RUNNING = 1
    SUCCESS = 2
    ERROR = 3
    CANCELLED = 4


_ALLOWED: dict[CompactionState, frozenset[CompactionState]] = {
    CompactionState.NOT_RUN: frozenset({CompactionState.RUNNING}),
    CompactionState.RUNNING: frozenset(
        {CompactionState.SUCCESS, CompactionState.ERROR, CompactionState.CANCELLED}
    ),
    CompactionState.SUCCESS: frozenset({CompactionState.RUNNING}),
    CompactionState.ERROR: frozenset({CompactionState.RUNNING}),
    CompactionState.CANCELLED: frozenset({CompactionState.RUNNING}),
}
FINAL = frozenset({CompactionState.SUCCESS, CompactionState.ERROR, CompactionState.CANCELLED})


class IllegalTransition(RuntimeError):
    """A bug: the state machine was asked for a move it does not have."""


@dataclass(frozen=True)
class CompactionStatus:
    state: CompactionState = CompactionState.NOT_RUN
    last_error: str = ""
    last_run: CompactionRun | None = None

    def to(
        self, state: CompactionState, *, error: str = "", run: CompactionRun | None = None
    ) -> CompactionStatus:
        if state not in _ALLOWED[self.state]:
            raise IllegalTransition(f"compaction state {self.state.name} -> {state.name}")
        error = error if state == CompactionState.ERROR else ""
        return replace(
            self, state=state, last_error=error, last_run=run if run is not None else self.last_run
        )

    def to_json(self) -> dict[str, object]:
        return {
            "state": self.state.name,
            "last_error": self.last_error,
            "last_run": self.last_run.to_dict() if self.last_run is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> CompactionStatus:
        """Load a persisted status; RUNNING means the run was cut short by a restart.
        A blob of another shape is ``ValueError`` (the caller sets it aside)."""
        if not data:
            return cls()
        try:
            state = CompactionState[str(data.get("state", "NOT_RUN"))]
            error = data.get("last_error", "")
            run = data.get("last_run")
            if not isinstance(error, str) or not (run is None or isinstance(run, dict)):
                raise TypeError("last_error or last_run of the wrong type")
            last = CompactionRun.from_dict(run) if run is not None else None
            if last is not None:
                last.to_pb()  # every figure of the type and range the wire needs
            status = cls(state, error, last)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed compaction status: {exc}") from None
        if state == CompactionState.RUNNING:
            status = status.to(CompactionState.ERROR, error=INTERRUPTED)
        return status

    def to_pb(
        self, ledger_id: int | None = None, horizon: MessageId | None = None
    ) -> pb.CompactionStatus:
        state = cast("pb.CompactionStatus.State.ValueType", int(self.state))
        out = pb.CompactionStatus(state=state, last_error=self.last_error)
        if ledger_id is not None:
            out.compacted_ledger_id = ledger_id
        if horizon is not None:
            out.horizon.ledger_id, out.horizon.entry_id = horizon
        if self.last_run is not None:
            out.last_run.CopyFrom(self.last_run.to_pb())
        return out
