"""InitProducerId (key 22): producer ids for idempotent producers, so that clients which
turn idempotence on by default (kafka-python 3, librdkafka with ``enable.idempotence``)
can produce. Ids are unique for the server's lifetime (a counter seeded from the clock,
so a restart does not hand out small ids again), epoch 0. compactlog does not deduplicate
by producer id and sequence (docs/kafka.md says why); a transactional id is refused.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext

INIT_PRODUCER_ID = 22


class ProducerIds:
    """Producer ids: increasing from the clock in microseconds at the start, so ids
    of a later run are above those a producer of an earlier run may still hold."""

    def __init__(self, seed: int | None = None) -> None:
        start = time.time_ns() // 1000 if seed is None else seed
        self._ids = itertools.count(start)
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            return next(self._ids)


_IDS = ProducerIds()


def response(version: int, code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Any:
    module = response_module(INIT_PRODUCER_ID, version)
    return make(
        module.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    if request.transactional_id is not None:
        # Transactions are not served: Kafka's answer to a transactional id this
        # producer may not use, fatal to the client (no retries until a timeout).
        return response(version, ErrorCode.transactional_id_authorization_failed)
    return response(version, ErrorCode.none, _IDS.next(), 0)
