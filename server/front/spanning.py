"""A spanning publish made whole across crashes: intent first, marked parts, redo.

A publish to a spread LEDGER ``NAME`` whose records go to partitions in several slots
(``front.spread.publish``) is recorded in the front's intent log (``front.intents``)
before any part is sent, each part goes to its slot marked with the spanning id
(``storage/spanning.py``) so a slot stores it at most once, and the parts are sent again
until each is stored. What happens on each kind of crash, and the crash points tests use
(``COMPACTLOG_FRONT_CRASH_AT``), is in docs/architecture.md ("The front room, module by module").
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from compactlog.crash_points import crash
from compactlog.server.front.intents import Intent, IntentLog
from compactlog.server.log.thread_futures import future_of
from compactlog.storage.spanning import SpanningPart

log = logging.getLogger("compactlog.front")

PUBLISH = "/compactlog.v1.Log/Publish"
# A slot's answer worth another try: it is down, restarting, stopping or overloaded.
RETRIABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.ABORTED,
    }
)
RETRY_FOR_S = 10.0  # how long a caller's call retries a part when it has no deadline
REDRIVE_EVERY_S = 1.0
_BACKOFF_S = (0.02, 0.05, 0.1, 0.2, 0.5)

Channel = Callable[[str], grpc.aio.Channel]  # partition topic -> its slot's channel
Metadata = tuple[tuple[str, Any], ...]
CRASH_ENV = "COMPACTLOG_FRONT_CRASH_AT"
# The spread admin calls' points are front.spread.admin's: each right after the home slot's part.
CRASH_POINTS = (
    "after_intent",
    "after_first_part",
    "after_home_create",
    "after_home_add_partitions",
    "after_home_config",
    "after_home_delete",
)


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


class Spanning:
    """Sends spanning publishes' parts and finishes open ones (``redrive``)."""

    def __init__(self, intents: IntentLog, channel: Channel, front_mark: Metadata) -> None:
        self.intents = intents
        self.channel = channel
        self.front_mark = front_mark
        self._redriver: asyncio.Task[None] | None = None
        # Intents a call or stream is still sending: the redriver leaves them alone, so
        # it never races a live stream's parts (a partition keeps its requests' order).
        self.live: set[int] = set()
        self.crash_at = os.environ.get(CRASH_ENV, "")  # tests only (module docstring)

    def record(self, parts: Sequence[tuple[str, bytes]]) -> tuple[Intent, asyncio.Future[None]]:
        """Record the parts (a quick unsynced write, on the event loop) and a future done
        once the intent is durable: its sync is shared with every intent recorded
        meanwhile (the intent log's group commit)."""
        intent, ticket = self.intents.write(parts)
        self.live.add(intent.txid)
        if not ticket:
            durable = asyncio.get_running_loop().create_future()
            durable.set_result(None)
            return intent, durable
        durable = future_of(lambda done: self.intents.group_commit.when_synced(ticket, done))
        durable.add_done_callback(_retrieve)  # a stream cut short may never await it
        return intent, durable

    async def begin(self, parts: Sequence[tuple[str, bytes]]) -> Intent:
        """Record the parts; returns once the intent is durable."""
        intent, durable = self.record(parts)
        try:
            await durable
        except BaseException:  # the caller went away: sending it is the redriver's
            self.release(intent.txid)
            raise
        if self.crash_at == "after_intent":
            crash(self.crash_at)
        return intent

    def release(self, txid: int) -> None:
        """Its call or stream has ended: an intent still open is the redriver's now."""
        self.live.discard(txid)

    def marker(self, intent: Intent) -> bytes:
        """The marker of ``intent``'s parts, with the floor as it is now."""
        return SpanningPart(intent.txid, self.intents.floor()).encode()

    async def publish(
        self, intent: Intent, metadata: Metadata, time_remaining: float | None
    ) -> list[bytes]:
        """Every part sent (retried while the slot is away, within ``time_remaining``);
        the replies in part order. On an error the intent stays open when the error may
        pass (the redriver finishes it) and is dropped when it cannot."""
        self.live.add(intent.txid)
        try:
            return await self._publish(intent, metadata, time_remaining)
        finally:
            self.release(intent.txid)

    async def _publish(
        self, intent: Intent, metadata: Metadata, time_remaining: float | None
    ) -> list[bytes]:
        deadline = time.monotonic() + (RETRY_FOR_S if time_remaining is None else time_remaining)
        if self.crash_at == "after_first_part":
            await self._send(intent, *intent.parts[0], metadata, deadline)
            crash(self.crash_at)
        results = await asyncio.gather(
            *(
                self._send(intent, topic, request, metadata, deadline)
                for topic, request in intent.parts
            ),
            return_exceptions=True,
        )
        replies: list[bytes] = []
        for result in results:
            if isinstance(result, BaseException):
                self._failed(intent, result)
                raise result
            replies.append(result)
        self.intents.done(intent.txid)
        return replies

    def _failed(self, intent: Intent, error: BaseException) -> None:
        if isinstance(error, grpc.aio.AioRpcError) and error.code() in RETRIABLE:
            return  # left open: the redriver sends it again
        log.error(
            "spanning publish %d cannot be made whole (%s): the parts stored stay stored",
            intent.txid,
            error.details() if isinstance(error, grpc.aio.AioRpcError) else error,
        )
        self.intents.done(intent.txid)

    async def _send(
        self, intent: Intent, topic: str, request: bytes, metadata: Metadata, deadline: float
    ) -> bytes:
        for attempt in itertools.count():
            left = deadline - time.monotonic()
            stub: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
            stub = self.channel(topic).unary_unary(PUBLISH)
            try:
                reply: bytes = await stub(
                    self.marker(intent) + request, timeout=max(left, 0.001), metadata=metadata
                )
                return reply
            except grpc.aio.AioRpcError as exc:
                pause = _BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)]
                if exc.code() not in RETRIABLE or left <= pause:
                    raise
                await asyncio.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover  (count() never ends)

    async def redrive(self) -> int:
        """Send again every open intent no call or stream is sending (in id order, one at
        a time, so a partition gets them in the order they were accepted); how many were
        made whole (or dropped for good)."""
        finished = 0
        for intent in self.intents.open_intents():
            if intent.txid in self.live:
                continue
            try:
                await self.publish(intent, self.front_mark, RETRY_FOR_S)
            except (grpc.aio.AioRpcError, OSError) as exc:
                log.warning("spanning publish %d is not whole yet: %s", intent.txid, exc)
                continue
            finished += 1
        return finished

    def start(self) -> None:
        """Finish what a crash left open now, then look again every second."""

        async def loop() -> None:
            while True:
                try:
                    await self.redrive()
                except Exception:  # never let the loop die with the front still up
                    log.exception("spanning publish redrive failed")
                await asyncio.sleep(REDRIVE_EVERY_S)

        self._redriver = asyncio.ensure_future(loop())

    async def stop(self) -> None:
        if self._redriver is not None:
            self._redriver.cancel()
            await asyncio.gather(self._redriver, return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(None, self.intents.close)


def channel_of(channels: dict[int, grpc.aio.Channel], slot_of: Callable[[str], int]) -> Channel:
    """The channel of the slot holding a partition topic, as it is now (a restarted shard
    gets a new one)."""
    return lambda topic: channels[slot_of(topic)]
