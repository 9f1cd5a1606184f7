"""A Consume that fails moves no cursor (CONTRACT section 12), in-process and exact.

The race that needs a real store but no network: the client cancels (or its deadline
passes) while the Consume's storage step is running on its thread. The step is held at
a gate, the call cancelled, the step let go; the read position must stay where it was,
so the next Consume gets the same messages. Both topic kinds.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

import pytest

from compactlog.server.broker import Broker
from compactlog.server.log import consuming
from compactlog.server.log.service import LogService
from compactlog.server.log.waiting import TopicSignals
from compactlog.server.metrics import Metrics
from compactlog.storage.config import ServerSettings
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb

RECORDS = [pb.Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(5)]


class Context:
    """The little of ``grpc.aio.ServicerContext`` a failing handler touches."""

    async def abort(self, code: Any, details: str) -> NoReturn:
        raise RuntimeError(f"{code}: {details}")

    async def send_initial_metadata(self, metadata: Any) -> None:
        pass


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path, ServerSettings(topic_defaults={}))
    yield b
    b.close()


class GatedStep:
    """``consume_step`` held at a gate until released; says when it has finished."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.real = consuming.consume_step

    def __call__(self, *args: Any) -> Any:
        self.entered.set()
        self.release.wait(10)
        try:
            return self.real(*args)
        finally:
            self.finished.set()


async def _cancelled_then_again(broker: Broker, gate: GatedStep, topic: str) -> list[int]:
    loop = asyncio.get_running_loop()
    signals = TopicSignals(loop)
    notify = signals.notify  # one bound method: the one to remove again
    broker.on_change(notify)
    try:
        return await _scenario(broker, gate, topic, signals)
    finally:  # the loop closes with this test; the store outlives it
        broker.ledgers.changes.remove(notify)
        broker.segments.changes.remove(notify)


async def _scenario(
    broker: Broker, gate: GatedStep, topic: str, signals: TopicSignals
) -> list[int]:
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(2) as executor:
        service = LogService(broker, Metrics(), executor, signals, 100)
        publish = pb.PublishRequest(topic=topic, records=RECORDS).SerializeToString()
        await service.Publish(publish, Context())
        req = pb.ConsumeRequest(topic=topic, subscription="s", max_messages=3)
        consuming.consume_step = gate  # type: ignore[assignment]
        try:
            call = asyncio.ensure_future(service.Consume(req, Context()))
            await loop.run_in_executor(None, gate.entered.wait, 10)
            call.cancel()  # the client went away while the step ran
            with pytest.raises(asyncio.CancelledError):
                await call
            gate.release.set()
            await loop.run_in_executor(None, gate.finished.wait, 10)
        finally:
            consuming.consume_step = gate.real
        reply = await service.Consume(req, Context())
    return [m.id.entry_id for m in pb.ConsumeResponse.FromString(reply).messages]


@pytest.mark.parametrize(
    "kind", [TopicKind.LEDGER, TopicKind.SEGMENTED], ids=["ledger", "segmented"]
)
def test_a_cancelled_consume_moves_no_cursor(broker: Broker, kind: TopicKind) -> None:
    broker.create_topic("t", kind, {})
    gate = GatedStep()
    assert asyncio.run(_cancelled_then_again(broker, gate, "t")) == [0, 1, 2]


class CountingExecutor(ThreadPoolExecutor):
    """Counts the storage steps handed to it."""

    steps = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.steps += 1
        return super().submit(fn, *args, **kwargs)


async def _steps_per_consume(broker: Broker, topic: str, kind: TopicKind) -> list[int]:
    """Executor steps of: a first Consume, a second, a LEDGER switch to read_compacted,
    and a Consume after the subscription was deleted; checks what each returned."""
    loop = asyncio.get_running_loop()
    with CountingExecutor(2) as executor:
        service = LogService(broker, Metrics(), executor, TopicSignals(loop), 100)
        publish = pb.PublishRequest(topic=topic, records=RECORDS).SerializeToString()
        await service.Publish(publish, Context())

        async def consume(compacted: bool = False) -> tuple[int, list[int]]:
            before = executor.steps
            req = pb.ConsumeRequest(
                topic=topic, subscription="s", max_messages=2, read_compacted=compacted
            )
            reply = await service.Consume(req, Context())
            ids = [m.id.entry_id for m in pb.ConsumeResponse.FromString(reply).messages]
            return executor.steps - before, ids

        counts = []
        for compacted, expected in ((False, [0, 1]), (False, [2, 3]), (True, [4])):
            steps, ids = await consume(compacted)
            assert ids == expected
            counts.append(steps)
        log = broker.log(topic)
        assert log.subscriptions()[0].reads_compacted is (kind == TopicKind.LEDGER)
        await loop.run_in_executor(None, log.delete_subscription, "s")
        service.dispatchers.forget(topic, "s")
        steps, ids = await consume()
        assert ids == [0, 1]  # a new subscription, not the deleted one's cursor
        return [*counts, steps]


@pytest.mark.parametrize(
    "kind", [TopicKind.LEDGER, TopicKind.SEGMENTED], ids=["ledger", "segmented"]
)
def test_a_consume_on_an_open_subscription_is_one_storage_step_at_most(
    broker: Broker, kind: TopicKind
) -> None:
    """Opening the subscription is a step of its own only when it writes: on first use,
    and on a LEDGER subscription when how it is read changes (recorded durably). The
    first read reads ahead, so the second Consume (same caps, same view) needs no step;
    reading the compacted view instead does not take what was read of the raw one."""
    broker.create_topic("t", kind, {})
    switch = 2 if kind == TopicKind.LEDGER else 1
    assert asyncio.run(_steps_per_consume(broker, "t", kind)) == [2, 0, switch, 2]
