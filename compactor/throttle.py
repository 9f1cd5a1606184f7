"""Throttler: keeps a run's I/O under ``log.cleaner.io.max.bytes.per.second``.

Kafka's cleaner throttle, applied by both designs' runs in their worker processes: the
LogCleaner's passes and the TwoPhaseCompactor's phases (bytes read and written alike).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Throttler:
    """Keeps the cleaner's I/O under ``log.cleaner.io.max.bytes.per.second``."""

    def __init__(
        self,
        bytes_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        check_interval_s: float = 0.1,
    ) -> None:
        self.rate = bytes_per_second
        self.clock, self.sleep, self.interval = clock, sleep, check_interval_s
        self._start = clock()
        self._observed = 0.0
        self.slept = 0.0

    @property
    def limited(self) -> bool:
        """False for the default rate (Kafka's Double.MAX_VALUE): nothing to hold."""
        return self.rate < 1e300

    def maybe_throttle(self, nbytes: int) -> None:
        if not self.limited:
            return
        self._observed += nbytes
        elapsed = self.clock() - self._start
        if elapsed < self.interval and self._observed < self.rate * self.interval:
            return
        wanted = self._observed / self.rate
        if wanted > elapsed:
            self.sleep(wanted - elapsed)
            self.slept += wanted - elapsed
        self._start = self.clock()
        self._observed = 0.0


def sleep_checking(check: Callable[[], None], slice_s: float = 0.05) -> Callable[[float], None]:
    """A ``sleep`` for the Throttler that calls ``check`` (which raises to stop the run)
    every ``slice_s``: a run throttled hard still stops at once when cancelled."""

    def sleep(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            check()
            time.sleep(min(left, slice_s))

    return sleep
