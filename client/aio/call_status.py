"""``SentStatus``: the status a server ended a request-streaming asyncio call with.

grpc aio (grpc/grpc#36066, open through 1.85) replaces a stream call's status with its
own INTERNAL "Internal error from Core" when a request written after the server ended
the call fails: it does whenever the server ends a stream early (a refused token, a
deleted topic) while requests are still going out, so a PermissionDenied came out as
``ServerUnreachable``. A call's done callbacks run each time a status is set, the
server's and grpc's overwrite alike, so ``SentStatus`` keeps the last status that is not
the overwrite, and ``error`` answers a failed call with it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

import grpc

from compactlog.rpc_errors import CORE_FAILURE

__all__ = ["SentStatus"]

T = TypeVar("T")

# How long a call whose write failed first waits for the status core delivers after it.
STATUS_WAIT_S = 1.0


def _settled(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a call's status coroutine once the status is set: it returns
    without waiting, so it runs to its end here, inside a done callback."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a call's status was read before it was set")


def overwritten(err: grpc.RpcError) -> bool:
    """Whether ``err`` is grpc's own status for a write that failed, not the server's."""
    try:
        return err.code() is grpc.StatusCode.INTERNAL and err.details() == CORE_FAILURE
    except Exception:  # an RpcError that is not a call
        return False


class SentStatus:
    """Watches one request-streaming call for the status its server ended it with."""

    def __init__(self, call: grpc.aio.Call) -> None:
        self._sent: grpc.aio.AioRpcError | None = None
        self._arrived = asyncio.Event()
        call.add_done_callback(self._done)

    def _done(self, call: grpc.aio.Call) -> None:
        try:
            code = _settled(call.code())
            details = _settled(call.details())
            if code is grpc.StatusCode.INTERNAL and details == CORE_FAILURE:
                return
            sent = grpc.aio.AioRpcError(
                code,
                _settled(call.initial_metadata()),
                _settled(call.trailing_metadata()),
                details,
            )
        except Exception:  # a grpc whose status cannot be read so: the call's own stands
            return
        self._sent = sent
        self._arrived.set()

    async def error(self, err: grpc.RpcError) -> grpc.RpcError:
        """``err``, or where it is grpc's overwrite the status the server sent (waited
        for up to ``STATUS_WAIT_S`` where the failed write came first)."""
        if not overwritten(err):
            return err
        if self._sent is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), STATUS_WAIT_S)
        return self._sent if self._sent is not None else err
