"""``AsyncPrefetch``: one Consume ahead of an ``AsyncConsumer``, the twin of ``Prefetch``.

While the application works through a full response (and acknowledges it), the next
Consume is already on its way, as in the threaded consumer; here the call is a task of
the running loop instead of a thread. Its response is applied by the caller when the
buffer is empty. Before anything that moves or releases the subscription (``seek``,
``redeliver_unacknowledged_messages``, ``close``) the call in flight is waited for and
its response dropped, so the server sees that Consume before the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

__all__ = ["AsyncPrefetch"]

R = TypeVar("R")


class AsyncPrefetch(Generic[R]):
    """At most one call in flight, as a task; its response may be marked to be dropped."""

    def __init__(self) -> None:
        self._ahead: asyncio.Task[R] | None = None
        self.stale = False  # the subscription moved since it went out: drop its response

    @property
    def pending(self) -> bool:
        return self._ahead is not None

    def start(self, call: Coroutine[Any, Any, R]) -> None:
        """Run ``call`` as a task (the caller checks ``pending`` first)."""
        assert self._ahead is None, "one call ahead at a time"
        self.stale = False
        self._ahead = asyncio.ensure_future(call)

    async def take(self, timeout_s: float | None) -> R | None:
        """The call's result, waiting at most ``timeout_s`` (``None`` when it has not
        come by then: it stays in flight); its error is raised here."""
        ahead = self._ahead
        if ahead is None:
            return None
        done, _ = await asyncio.wait({ahead}, timeout=timeout_s)
        if not done:
            return None
        self._ahead = None
        return ahead.result()

    async def drop(self) -> None:
        """Wait for the call in flight and forget its result and its error."""
        ahead, self._ahead = self._ahead, None
        self.stale = False
        if ahead is not None:
            with contextlib.suppress(Exception):  # the response is dropped: so is its error
                await ahead
