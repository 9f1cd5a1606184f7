"""One ConsumeStream through the front: relayed whole to the owner of the topic it opens.

A ConsumeStream's flows all name one topic, so the stream goes to the slot that owns the
topic its first flow names (field 1, as every Log request), and both directions pass
through as bytes: the consumer's permits down, the slot's responses up, its error status
as it sent it. The caller's end (half-close, cancel) ends the slot's stream likewise, so
the slot releases the consumer. A partitioned ``NAME`` spread over several shards
(partition placement) is not streamed yet: UNIMPLEMENTED, and the client consumes it by
Consume, which the front merges.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import grpc

from compactlog.errors import Unimplemented
from compactlog.server.front.relay import Ctx, forwarded, relay
from compactlog.server.rpc.errors import abort_async
from compactlog.server.rpc.wire_peek import topic_of

if TYPE_CHECKING:
    from compactlog.server.front.router import Owners


def consume_stream_relay(
    owners: Owners, method: str, spread: Callable[[str], bool]
) -> Callable[[AsyncIterator[bytes], Any], AsyncIterator[bytes]]:
    """The handler; ``spread`` tells a partitioned ``NAME`` spread over shards."""

    async def handle(requests: AsyncIterator[bytes], context: Ctx) -> AsyncIterator[bytes]:
        first = await anext(aiter(requests), None)
        if first is None:
            return
        topic = topic_of(first) or ""
        if spread(topic):
            refusal = Unimplemented(
                f"topic {topic}'s partitions span several shards: ConsumeStream is not "
                "served for it yet, use Consume",
                topic=topic,
            )
            await abort_async(context, refusal, "ConsumeStream")
        slot = owners.slot(method, first)

        async def flows() -> AsyncIterator[bytes]:
            yield first
            async for request in requests:
                yield request

        stub: grpc.aio.StreamStreamMultiCallable[bytes, bytes]
        stub = owners.channels[slot].stream_stream(method)
        call = stub(
            flows(),
            timeout=context.time_remaining(),
            metadata=forwarded(context.invocation_metadata()),
        )
        try:
            await call.initial_metadata()  # the owner admitted the consumer: so does the front
            if not call.done():
                await context.send_initial_metadata(())
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as exc:
            await relay(context, exc)
        finally:
            call.cancel()

    return handle
