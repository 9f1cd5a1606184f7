"""How a consumer rides out a server restart: pulsar-client reconnects a consumer in the
background and ``receive`` just waits; here a Consume that found no server (or one
shutting down) is tried again after a backoff of 0.1 s doubling to 2 s, for as long as
the ``receive`` may wait, and the next Consume asks the server to redeliver from the
mark-delete position (``ConsumerState.fetch_failed``), as pulsar-client does on
reconnect. Any other error is the caller's at once."""

from __future__ import annotations

import logging
import time

from compactlog.errors import CompactlogError, ShuttingDown
from compactlog.rpc_errors import ServerUnreachable

__all__ = ["Reconnect"]

log = logging.getLogger("compactlog.client")

FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0


class Reconnect:
    """The backoff of one consumer between failed Consume calls."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._backoff = 0.0

    def succeeded(self) -> None:
        if self._backoff:
            log.info("%s: the server answers again", self._what)
        self._backoff = 0.0

    def pause(self, exc: CompactlogError, end: float | None) -> float:
        """Seconds to wait before the next try after ``exc``; ``exc`` itself when it is
        not a lost server, or when the wait would pass ``end`` (a monotonic time)."""
        if not isinstance(exc, ServerUnreachable | ShuttingDown):
            raise exc
        if not self._backoff:
            log.warning("%s: %s; trying again until it answers", self._what, exc)
        self._backoff = min(MAX_BACKOFF_S, self._backoff * 2 or FIRST_BACKOFF_S)
        if end is None:
            return self._backoff
        left = end - time.monotonic()
        if left <= 0:
            raise exc
        return min(self._backoff, left)
