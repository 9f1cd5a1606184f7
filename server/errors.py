"""Exceptions to gRPC statuses, in one place.

Every servicer method is wrapped by ``rpc``: a ``CompactlogError`` becomes its own
status code with its message; anything else is a bug, logged with its traceback on
the server and answered as INTERNAL without leaking the traceback.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

import grpc

from compactlog.errors import CompactlogError

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


def status_code(exc: CompactlogError) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, exc.code, grpc.StatusCode.INTERNAL)


# Called with (method, status code name) for every error answered; the metrics hook in.
error_listeners: list[Callable[[str, str], None]] = []


def _abort(context: grpc.ServicerContext, exc: BaseException, method: str) -> None:
    context.abort(*_status_of(exc, method))


def rpc(func: F) -> F:
    """Map exceptions of a unary or server-streaming servicer method to statuses."""
    name = func.__name__
    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def stream(self: Any, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            try:
                yield from func(self, request, context)
            except Exception as exc:
                _abort(context, exc, name)

        return stream  # type: ignore[return-value]

    @functools.wraps(func)
    def unary(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return func(self, request, context)
        except Exception as exc:
            _abort(context, exc, name)

    return unary  # type: ignore[return-value]


def _status_of(exc: BaseException, method: str) -> tuple[grpc.StatusCode, str]:
    code = status_code(exc) if isinstance(exc, CompactlogError) else grpc.StatusCode.INTERNAL
    for listener in error_listeners:
        listener(method, code.name)
    if isinstance(exc, CompactlogError):
        return code, str(exc)
    log.error("unexpected error in %s", method, exc_info=exc)
    return code, f"internal error in {method}: {type(exc).__name__}: {exc}"


def rpc_async(func: F) -> F:
    """``rpc`` for ``async def`` servicer methods and async generators (grpc.aio)."""
    name = func.__name__
    if inspect.isasyncgenfunction(func):

        @functools.wraps(func)
        async def stream(self: Any, request: Any, context: Any) -> AsyncIterator[Any]:
            try:
                async for item in func(self, request, context):
                    yield item
            except Exception as exc:
                await context.abort(*_status_of(exc, name))

        return stream  # type: ignore[return-value]

    @functools.wraps(func)
    async def unary(self: Any, request: Any, context: Any) -> Any:
        try:
            return await func(self, request, context)
        except Exception as exc:
            await context.abort(*_status_of(exc, name))

    return unary  # type: ignore[return-value]


async def abort_async(context: Any, exc: BaseException, method: str) -> None:
    """End a grpc.aio call with the status of ``exc``, as ``rpc_async`` does: for code that
    refuses a call before any servicer runs (``server.auth``)."""
    await context.abort(*_status_of(exc, method))
