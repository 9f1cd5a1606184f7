"""The client loops ``compactlog bench client`` times (``benchmarks/client_rates.py``), each
on a topic the caller loaded: a reader's ``read_next`` (also reading each message's key
and value), a consumer's ``receive`` with a
cumulative ack every 1000 or an ack of each message (pulsar-client's usual loop), its
``batch_receive``, and the sync and asyncio producers' sends. Each returns how many
messages it handled, so that a short loop is caught (``client_rates._rate``).
"""

from __future__ import annotations

import asyncio
import time

from compactlog.client import Client, InitialPosition, MessageId, Result
from compactlog.client.aio import AsyncClient

TOPIC, SENT = "client-read", "client-send"
AIO_SENT, AIO_GATHERED = "client-aio-send-async", "client-aio-send"
VALUE = b"v" * 100
ACK_EVERY = 1000


def read_next(client: Client, count: int) -> int:
    reader = client.create_reader(TOPIC, MessageId.earliest)
    try:
        for _ in range(count):
            reader.read_next()
        return count
    finally:
        reader.close()


def read_fields(client: Client, count: int) -> int:
    """``read_next`` in a loop that reads each message as a user's loop does: its key and
    value (the other loops hand messages out unread)."""
    reader = client.create_reader(TOPIC, MessageId.earliest)
    try:
        for _ in range(count):
            msg = reader.read_next()
            msg.partition_key()
            msg.data()
        return count
    finally:
        reader.close()


def receive(client: Client, count: int) -> int:
    consumer = client.subscribe(TOPIC, "bench-receive", initial_position=InitialPosition.Earliest)
    try:
        for i in range(1, count + 1):
            msg = consumer.receive()
            if i % ACK_EVERY == 0 or i == count:
                consumer.acknowledge_cumulative(msg)
        return count
    finally:
        consumer.close()


def batch_receive(client: Client, count: int) -> int:
    consumer = client.subscribe(TOPIC, "bench-batch", initial_position=InitialPosition.Earliest)
    got = 0
    try:
        while got < count:
            batch = consumer.batch_receive()
            got += len(batch)
            consumer.acknowledge_cumulative(batch[-1])
        return got
    finally:
        consumer.close()


def receive_ack_each(client: Client, count: int, times: dict[str, float]) -> int:
    """``msg = consumer.receive(); consumer.acknowledge(msg)``, then ``close()`` (which
    returns once every ack is stored): ``times`` gets the loop's and the close's seconds."""
    consumer = client.subscribe(TOPIC, "bench-each", initial_position=InitialPosition.Earliest)
    started = time.perf_counter()
    try:
        for _ in range(count):
            consumer.acknowledge(consumer.receive())
        times["loop"] = time.perf_counter() - started
        return count
    finally:
        closing = time.perf_counter()
        consumer.close()
        times["close"] = time.perf_counter() - closing


def send_async(client: Client, keys: list[bytes]) -> int:
    producer = client.create_producer(SENT)
    stored = [0]

    def callback(result: object, _msg_id: MessageId | None) -> None:
        if result is Result.Ok:
            stored[0] += 1

    for key in keys:
        producer.send_async(VALUE, callback, partition_key=key)
    producer.flush()
    producer.close()
    return stored[0]


def aio_send_async(address: str, keys: list[bytes]) -> int:
    stored = [0]

    def callback(result: object, _msg_id: MessageId | None) -> None:
        if result is Result.Ok:
            stored[0] += 1

    async def sends() -> None:
        async with AsyncClient(address, timeout=600) as client:
            producer = await client.create_producer(AIO_SENT)
            for key in keys:
                producer.send_async(VALUE, callback, partition_key=key)
            await producer.close()  # flushes

    asyncio.run(sends())
    return stored[0]


def aio_gather_floor(count: int, per_reply: int = 1000) -> int:
    """asyncio's own cost of the gathered shape, no I/O: ``count`` coroutines gathered,
    each awaiting a future of its own that a reply resolves ``per_reply`` at a time (a
    task and a future per message, as ``aio_send`` has): the floor of that row."""

    async def gathered() -> int:
        loop = asyncio.get_running_loop()
        waiting: list[asyncio.Future[int]] = []
        made = [0]

        def reply(futures: list[asyncio.Future[int]]) -> None:
            for future in futures:
                future.set_result(1)

        async def send() -> int:
            future: asyncio.Future[int] = loop.create_future()
            waiting.append(future)
            made[0] += 1
            if len(waiting) >= per_reply or made[0] == count:  # the last reply may be short
                loop.call_soon(reply, waiting[:])
                waiting.clear()
            return await future

        return sum(await asyncio.gather(*(send() for _ in range(count))))

    return asyncio.run(gathered())


def aio_send(address: str, keys: list[bytes]) -> int:
    async def sends() -> int:
        async with AsyncClient(address, timeout=600) as client:
            producer = await client.create_producer(AIO_GATHERED)
            ids = await asyncio.gather(*(producer.send(VALUE, partition_key=k) for k in keys))
            await producer.close()
            return len(ids)

    return asyncio.run(sends())
