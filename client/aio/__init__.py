"""The client's calls as coroutines, on ``grpc.aio``: ``AsyncClient`` with the method names
of ``compactlog.client.Client`` (pulsar-client's), each awaited.

    from compactlog.client import MessageId
    from compactlog.client.aio import AsyncClient

    async with AsyncClient("127.0.0.1:7650") as client:
        producer = await client.create_producer("prices")
        await producer.send(b"189.5", partition_key="AAPL")
        consumer = await client.subscribe("prices", "dashboard")
        msg = await consumer.receive(timeout_millis=1000)
        await consumer.acknowledge(msg)

Requests, conversions, consumer books and reader starts are the synchronous client's own
(``_convert``, ``consumer_state``, ``topic_reader``, ``topic_producer``): only the calls
differ. Errors are the same classes, ``Timeout`` included, never a ``grpc.RpcError``.
"""

from compactlog.client.aio.client import AsyncClient
from compactlog.client.aio.consumer import AsyncConsumer
from compactlog.client.aio.producer import AsyncProducer
from compactlog.client.aio.reader import AsyncReader

__all__ = ["AsyncClient", "AsyncConsumer", "AsyncProducer", "AsyncReader"]
