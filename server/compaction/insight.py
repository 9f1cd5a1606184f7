"""Compaction control and insight (CONTRACT section 7), beside the run bookkeeping.

``watch``, ``cancel``, ``caller_gone`` and ``verification_pb`` serve WatchCompaction,
CancelCompaction, PreviewCompaction and VerifyCompaction over what ``compaction.service``
shares (a run's ``LocalRunControl``, the event set when no run is active, the state now);
the service owns the runs. What each does is in docs/architecture.md ("The compaction
room") and docs/compaction.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import cast

from compactlog.compactor.progress import LocalRunControl, Progress, RunCancelled, RunControl
from compactlog.compactor.two_phase.ledger_snapshot import CompactedView
from compactlog.compactor.two_phase.verify import Verification
from compactlog.errors import Cancelled, CompactionNotRunning
from compactlog.server.compaction.status import CompactionState
from compactlog.server.rpc.convert import id_to_pb
from compactlog.v1 import compactlog_pb2 as pb

WATCH_INTERVAL_S = 0.25
CANCEL_WAIT_S = 60.0


def progress_pb(state: CompactionState, progress: Progress) -> pb.CompactionProgress:
    return pb.CompactionProgress(
        state=cast("pb.CompactionStatus.State.ValueType", int(state)),
        phase=progress.phase,
        done=progress.done,
        total=progress.total,
        bytes_read=progress.bytes_read,
        bytes_written=progress.bytes_written,
        elapsed_ms=progress.elapsed_ms,
    )


def watch(
    control: LocalRunControl | None,
    idle: threading.Event,
    state_now: Callable[[], CompactionState],
    gone: Callable[[], bool],
) -> Iterator[pb.CompactionProgress]:
    """Updates of the run ``control`` belongs to until it ends (or the caller is ``gone``)."""
    if control is None or idle.is_set():
        yield progress_pb(state_now(), control.snapshot() if control else Progress())
        return
    while not idle.wait(WATCH_INTERVAL_S):
        if gone():
            return
        yield progress_pb(CompactionState.RUNNING, control.snapshot())
    yield progress_pb(state_now(), control.snapshot())


def cancel(topic: str, control: LocalRunControl | None, idle: threading.Event) -> None:
    """Ask the run to stop and wait (a while) until it has."""
    if control is None or idle.is_set():
        raise CompactionNotRunning(f"no compaction of {topic!r} is running", topic=topic)
    control.cancel()
    idle.wait(CANCEL_WAIT_S)


@contextmanager
def cap_slot(cap: threading.BoundedSemaphore, control: RunControl | None) -> Iterator[None]:
    """One of the server-wide run slots; a run cancelled while it waits gives up."""
    while not cap.acquire(timeout=0.1):
        if control is not None:
            control.check()
    try:
        yield
    finally:
        cap.release()


def verification_pb(view: CompactedView, result: Verification) -> pb.VerifyCompactionResponse:
    out = pb.VerifyCompactionResponse(
        ok=result.ok,
        checked=result.checked,
        digest=result.digest,
        problems=result.problems,
        compacted_ledger_id=view.ledger_id or 0,
    )
    if view.horizon is not None:
        id_to_pb(view.horizon, out.horizon)
    return out


@contextmanager
def caller_gone(topic: str, what: str) -> Iterator[None]:
    """A read stopped because its caller went away answers CANCELLED (nobody hears it),
    not an unexpected error in the server's log."""
    try:
        yield
    except RunCancelled:
        raise Cancelled(f"the {what} of {topic!r} was cancelled: its caller went away") from None
