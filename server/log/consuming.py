"""Log.Consume: one consumer's call on a subscription, by its type (CONTRACT section 6).

A call is admitted by the subscription's dispatcher (``server.log.dispatchers``), then
steps until it has messages or its ``wait_ms`` runs out: first the messages due again,
then reading on from the subscription's read position, which moves only once a step's
response is in hand. Locking, failures and redelivery are explained in
docs/subscriptions.md ("How the server hands out messages").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from compactlog.server.log.dispatchers import Dispatcher, Dispatchers, type_name
from compactlog.server.log.reading import consume_step, message_ids, redelivery_step, response_cap
from compactlog.server.log.waiting import TopicSignals
from compactlog.server.metrics import Metrics
from compactlog.server.rpc.convert import start_position
from compactlog.storage.cursor import SUBSCRIPTION_TYPE_PROPERTY, Cursor
from compactlog.storage.topic_log import TopicLog
from compactlog.v1 import compactlog_pb2 as pb

T = TypeVar("T")
Run = Callable[..., Awaitable[Any]]

# A FAILOVER consumer on standby looks again this often whether it has become active.
STANDBY_POLL_S = 0.25


class Consuming:
    def __init__(
        self,
        run: Run,
        signals: TopicSignals,
        metrics: Metrics,
        batch_size: int,
        dispatchers: Dispatchers,
    ) -> None:
        self.run = run
        self.signals = signals
        self.metrics = metrics
        self.batch_size = batch_size
        self.dispatchers = dispatchers

    async def consume(self, log: TopicLog, request: pb.ConsumeRequest) -> bytes:
        """Up to ``max_messages`` messages for this consumer, waiting up to ``wait_ms``."""
        latest = start_position(request.initial_position) == pb.LATEST
        created = {SUBSCRIPTION_TYPE_PROPERTY: type_name(request.subscription_type)}
        cursor: Cursor = await self.run(
            log.open_cursor, request.subscription, latest, request.read_compacted, created
        )
        dispatcher = self.dispatchers.of(log.name, cursor)
        dispatcher.check_type(request.subscription_type)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.wait_ms / 1000.0
        asked = request.redeliver_unacknowledged
        started = dispatcher.clock()
        name = request.consumer_name
        while True:
            change = self.signals.next_change(log.name)
            if dispatcher.closed_since(name, started):
                return b""  # CloseConsumer came while this call waited: it gets nothing
            admission = dispatcher.admit(name)
            if admission.receive:
                async with dispatcher.lock:
                    if dispatcher.closed_since(name, started):
                        return b""
                    response = await self._step(
                        log, cursor, dispatcher, request, admission.rewind, asked
                    )
                asked = False
                if response is not None:
                    return response
            remaining = deadline - loop.time()
            if remaining <= 0 or log.gone() or self.signals.stopping.is_set():
                return b""
            # Look again before the liveness runs out, so a waiting consumer stays live.
            timeout = min(remaining, dispatcher.next_due(), dispatcher.liveness_s / 2)
            if not admission.receive:
                timeout = min(timeout, STANDBY_POLL_S)
            await self.signals.wait(change, timeout)

    async def close(self, log: TopicLog, request: pb.CloseConsumerRequest) -> None:
        """``Log.CloseConsumer`` on one topic: the consumer leaves its subscription's
        dispatcher now (after any delivery step under way, so what that step hands it is
        released too), and the consumers waiting on the topic look again at once. A
        subscription with no consumers in memory has nothing to release."""
        dispatcher = self.dispatchers.get(log.name, request.subscription)
        if dispatcher is None:
            return
        async with dispatcher.lock:
            dispatcher.close(request.consumer_name)
        self.signals.notify(log.name)

    async def _step(
        self,
        log: TopicLog,
        cursor: Cursor,
        dispatcher: Dispatcher,
        request: pb.ConsumeRequest,
        takeover: bool,
        asked: bool,
    ) -> bytes | None:
        """One response for this consumer, or None when there is nothing for it now."""
        if dispatcher.reset_requested:  # an admin moved the cursor
            dispatcher.reset_requested = False
            dispatcher.rewound()
        rewound = takeover or (asked and not dispatcher.tracks)
        if rewound:
            dispatcher.rewound()
        elif asked:
            dispatcher.release(request.consumer_name)
        limit = request.max_messages or self.batch_size
        max_bytes = response_cap(request.max_bytes)
        track = dispatcher.tracks or request.ack_timeout_ms > 0
        ready = dispatcher.ready(limit)
        if ready:
            again, sent, scanned = await self.run(
                redelivery_step, log, cursor, ready, limit, request.read_compacted, max_bytes
            )
            dispatcher.drop(i for i in ready if i <= scanned and i not in sent)
            if again is not None:
                if track:
                    dispatcher.delivered(request.consumer_name, sent, request.ack_timeout_ms)
                else:
                    dispatcher.drop(sent)
                self.metrics.consume_messages.inc(again[1])
                data: bytes = again[0]
                return data
        position = cursor.mark_delete if rewound else cursor.read_position
        step, position = await self.run(
            consume_step, log, cursor, position, limit, request.read_compacted, max_bytes
        )
        log.delivered(cursor, position, rewound)
        if step is None:
            return None
        self.metrics.consume_messages.inc(step[1])
        if track:
            ids = message_ids(step[0], f"topic {log.name!r}")
            dispatcher.delivered(request.consumer_name, ids, request.ack_timeout_ms)
        response: bytes = step[0]
        return response
