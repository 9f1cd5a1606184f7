"""The server's compaction state machine and its persisted form."""

from __future__ import annotations

import pytest

from compactlog.compactor.two_phase import CompactionRun
from compactlog.server.compaction.status import (
    INTERRUPTED,
    CompactionState,
    CompactionStatus,
    IllegalTransition,
)
from compactlog.v1 import compactlog_pb2 as pb

S = CompactionState


def test_transitions_are_checked() -> None:
    status = CompactionStatus()
    running = status.to(S.RUNNING)
    assert running.to(S.SUCCESS, run=CompactionRun(read=3)).last_run == CompactionRun(read=3)
    failed = running.to(S.ERROR, error="boom")
    assert failed.last_error == "boom" and failed.to(S.RUNNING).last_error == ""
    for bad_from, bad_to in [
        (S.NOT_RUN, S.SUCCESS),
        (S.NOT_RUN, S.ERROR),
        (S.SUCCESS, S.ERROR),
        (S.RUNNING, S.RUNNING),
        (S.ERROR, S.SUCCESS),
    ]:
        with pytest.raises(IllegalTransition):
            CompactionStatus(bad_from).to(bad_to)


def test_round_trip_and_interrupted_run() -> None:
    done = CompactionStatus().to(S.RUNNING).to(S.SUCCESS, run=CompactionRun(read=5, kept=2))
    assert CompactionStatus.from_json(done.to_json()) == done
    cut = CompactionStatus.from_json(done.to(S.RUNNING).to_json())
    assert cut.state == S.ERROR and cut.last_error == INTERRUPTED and cut.last_run == done.last_run
    assert CompactionStatus.from_json(None) == CompactionStatus()


def test_to_pb() -> None:
    status = (
        CompactionStatus().to(S.RUNNING).to(S.SUCCESS, run=CompactionRun(read=5, kept=2, removed=3))
    )
    out = status.to_pb(7, None)
    assert out.state == pb.CompactionStatus.SUCCESS and out.compacted_ledger_id == 7
    assert (out.last_run.read, out.last_run.removed, out.last_run.engine) == (5, 3, "local")
