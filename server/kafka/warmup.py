"""kio's schemas loaded on a thread of their own as the listener starts, before clients ask.

The first request of each API version imports kio's schema modules and builds their
readers and writers. On the 2-core VM that made a fresh server's first Fetch v12 take
~250 ms (~170 ms of it reading the request), its first ListOffsets ~40 ms and
ApiVersions ~27 ms: more than the Fetches of a whole 100,000-record topic after them.
``Warmup`` loads, in the order clients send them, the highest version of every API
served (what a client that knows it takes) and the lower ones current librdkafka sends.
A client that comes meanwhile waits at most for the module then being imported, which
its own request would have imported anyway; other versions still load on first use.
"""

from __future__ import annotations

import logging
import threading

from compactlog.server.kafka import protocol
from compactlog.server.kafka.api_versions import SUPPORTED

log = logging.getLogger("compactlog.kafka")

# What a consumer and a producer send first, in order: ApiVersions, Metadata, Fetch,
# ListOffsets, Produce, FindCoordinator, OffsetFetch, OffsetCommit, InitProducerId.
FIRST = (18, 3, 1, 2, 0, 10, 9, 8, 22)
# The versions librdkafka 2.16 sends below our highest (its debug=protocol log).
LIBRDKAFKA = {18: 3, 10: 2, 11: 5, 12: 3, 13: 1, 14: 3, 19: 4}


def versions() -> list[tuple[int, int]]:
    """(api key, version) pairs in the order they are loaded."""
    keys = sorted(SUPPORTED, key=lambda k: (FIRST.index(k) if k in FIRST else len(FIRST), k))
    order: list[tuple[int, int]] = []
    for key in keys:
        order.append((key, SUPPORTED[key][1]))
        if LIBRDKAFKA.get(key, SUPPORTED[key][1]) != SUPPORTED[key][1]:
            order.append((key, LIBRDKAFKA[key]))
    return order


class Warmup:
    """Loads ``versions()`` once; ``stop`` ends it after the one under way."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafka-warmup", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        for key, version in versions():
            if self._stop.is_set():
                return
            try:
                protocol.load_schemas(key, version)
            except Exception as exc:  # the first request will say why, as it did before
                log.warning("kafka: api %d v%d did not load ahead: %s", key, version, exc)
