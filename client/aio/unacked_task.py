"""``UnackedTask``: an asyncio consumer's ack timeout ticking on a task of its loop.

The asyncio twin of what the threaded consumer's ack sender thread carries
(``client.ack_sender``): while the consumer's ``unacked_tracker.UnackedTracker`` holds
ids, one task sleeps until its next tick that sends something back, sends back the ids
whose timeout ran out (the consumer's call: a negative acknowledgement with no delay), and
ends once nothing is timed; the consumer's next hand-over starts it again (``watch``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from compactlog.client.unacked_tracker import UnackedTracker
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["UnackedTask"]

SendBack = Callable[[list[pb.MessageId]], Awaitable[None]]


class UnackedTask:
    """One consumer's tracker and the task that ticks it."""

    def __init__(self, tracker: UnackedTracker, send_back: SendBack) -> None:
        self._tracker = tracker
        self._send_back = send_back
        self._task: asyncio.Task[None] | None = None

    def watch(self) -> None:
        """The tracker holds ids now: the task runs (started unless it is running)."""
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        tracker = self._tracker
        while (due := tracker.due()) is not None:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            expired = tracker.expire()
            if expired:
                await self._send_back(expired)

    async def close(self) -> None:
        """No more ticks: the task cancelled and waited for."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
