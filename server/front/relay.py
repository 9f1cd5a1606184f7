"""What every call the front passes on shares: the caller's metadata and its errors.

Kept apart from ``router`` so that the modules answering calls on a spread partitioned
topic (``front.spread``) use the same forwarding and relaying as the one-owner paths
without importing the router (which imports them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from compactlog.server.front.secret import FRONT_KEY

Ctx = grpc.aio.ServicerContext[bytes, bytes]
_HOP_BY_HOP = ("user-agent", "content-type", "te", "grpc-", ":")


def forwarded(metadata: Any) -> tuple[tuple[str, Any], ...]:
    """The caller's metadata worth passing on (the token, custom keys), not the transport's
    nor a front mark (only the front itself sets one: ``Owners.front_mark``)."""
    return tuple(
        (k, v) for k, v in (metadata or ()) if not k.startswith(_HOP_BY_HOP) and k != FRONT_KEY
    )


async def relay(context: Ctx, exc: grpc.aio.AioRpcError) -> None:
    """End the caller's call with a shard's error: its code, message and rich-error
    trailer (``ErrorInfo``), as the shard sent them."""
    trailers = forwarded(exc.trailing_metadata())
    trailers += tuple(
        (k, v) for k, v in (exc.trailing_metadata() or ()) if k == "grpc-status-details-bin"
    )
    await context.abort(exc.code(), exc.details() or "", trailers)


@dataclass(frozen=True)
class SlotCall:
    """How the front asks a slot: the metadata sent (the front's mark, then the caller's
    token and custom keys, if a caller is behind it) and the time left (None: no deadline).
    The front's own work (the spread topics' repair) carries the mark alone."""

    metadata: tuple[tuple[str, Any], ...]
    timeout: float | None

    @classmethod
    def of(cls, context: Ctx, mark: tuple[tuple[str, Any], ...]) -> SlotCall:
        """On behalf of the caller of ``context``."""
        return cls(mark + forwarded(context.invocation_metadata()), context.time_remaining())
