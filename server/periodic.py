"""A named background thread that runs a task every interval until stopped."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Periodic:
    def __init__(self, name: str, interval_s: float, task: Callable[[], None]) -> None:
        self.name = name
        self.interval_s = interval_s
        self.task = task
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Periodic:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.task()
            except Exception:  # one bad round must not stop the thread
                log.exception("%s failed", self.name)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
