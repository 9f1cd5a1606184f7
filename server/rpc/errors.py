"""Exceptions to gRPC statuses, in one place (CONTRACT section 5).

Every servicer method is wrapped by ``rpc`` (synchronous servicers) or ``rpc_async`` (the
asyncio Log service): a ``CompactlogError`` becomes its own status with a
``google.rpc.ErrorInfo`` (its ``reason`` and ``metadata``), anything else is a bug answered
INTERNAL, and a ``Refused`` request is answered with the error it holds. The details are in
docs/architecture.md ("The rpc room") and docs/errors.md.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from compactlog.errors import DOMAIN, INTERNAL_REASON, CompactlogError, from_os_error

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


class Refused:
    """What a checked deserializer hands a servicer instead of a request it refused."""

    __slots__ = ("error",)

    def __init__(self, error: CompactlogError) -> None:
        self.error = error


def status_code(exc: CompactlogError) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, exc.code, grpc.StatusCode.INTERNAL)


# Called with (method, status code name) for every error answered; the metrics hook in.
error_listeners: list[Callable[[str, str], None]] = []


def error_status(exc: BaseException, method: str) -> grpc.Status:
    """The status (code, message, rich-error trailer) that answers ``exc`` in ``method``.
    An ``OSError`` that no storage path turned into ours still answers with its cause's
    reason (DISK_FULL, FILE_LIMIT, STORAGE_UNAVAILABLE), never INTERNAL; it is logged with
    its traceback so the path that let it through can be found."""
    if isinstance(exc, OSError):
        log.warning("%s met an unchecked OS error", method, exc_info=exc)
        exc = from_os_error(exc, method)
    if isinstance(exc, CompactlogError):
        code, message = status_code(exc), str(exc) or f"{method} failed"
        reason, metadata = exc.reason, exc.metadata
        if code == grpc.StatusCode.INTERNAL:
            log.error("%s answered INTERNAL: %s", method, message)
    else:
        log.error("unexpected error in %s", method, exc_info=exc)
        code = grpc.StatusCode.INTERNAL
        message = f"internal error in {method}: {type(exc).__name__}: {exc}"
        reason, metadata = INTERNAL_REASON, {"method": method}
    for listener in error_listeners:
        listener(method, code.name)
    detail = status_pb2.Status(code=code.value[0], message=message)
    detail.details.add().Pack(
        error_details_pb2.ErrorInfo(domain=DOMAIN, reason=reason, metadata=metadata)
    )
    status: grpc.Status = rpc_status.to_status(detail)
    return status


def _abort(context: Any, status: grpc.Status) -> None:
    """End a synchronous call with ``status``. grpc.aio's context of a synchronous
    handler has ``abort`` with trailing metadata but no ``abort_with_status``."""
    abort_with_status = getattr(context, "abort_with_status", None)
    if abort_with_status is not None:
        abort_with_status(status)
    else:
        context.abort(status.code, status.details, status.trailing_metadata)


def _checked(request: Any) -> Any:
    """The request, its refusal raised; a request stream checked message by message."""
    if isinstance(request, Refused):
        raise request.error
    if isinstance(request, Iterator):
        return _checked_stream(request)
    return request


def _checked_stream(requests: Iterator[Any]) -> Iterator[Any]:
    for request in requests:
        if isinstance(request, Refused):
            raise request.error
        yield request


async def _checked_async_stream(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for request in requests:
        if isinstance(request, Refused):
            raise request.error
        yield request


def _checked_async(request: Any) -> Any:
    if hasattr(request, "__aiter__"):
        return _checked_async_stream(request)
    return _checked(request)


def rpc(func: F) -> F:
    """Map exceptions of a synchronous servicer method (unary or streaming) to statuses."""
    name = func.__name__
    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def stream(self: Any, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            try:
                yield from func(self, _checked(request), context)
            except Exception as exc:
                _abort(context, error_status(exc, name))

        return stream  # type: ignore[return-value]

    @functools.wraps(func)
    def unary(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return func(self, _checked(request), context)
        except Exception as exc:
            _abort(context, error_status(exc, name))

    return unary  # type: ignore[return-value]


def rpc_async(func: F) -> F:
    """``rpc`` for ``async def`` servicer methods and async generators (grpc.aio)."""
    name = func.__name__
    if inspect.isasyncgenfunction(func):

        @functools.wraps(func)
        async def stream(self: Any, request: Any, context: Any) -> AsyncIterator[Any]:
            try:
                async for item in func(self, _checked_async(request), context):
                    yield item
            except Exception as exc:
                await abort_async(context, exc, name)

        return stream  # type: ignore[return-value]

    @functools.wraps(func)
    async def unary(self: Any, request: Any, context: Any) -> Any:
        try:
            return await func(self, _checked_async(request), context)
        except Exception as exc:
            await abort_async(context, exc, name)

    return unary  # type: ignore[return-value]


async def abort_async(context: Any, exc: BaseException, method: str) -> None:
    """End a grpc.aio call with the status of ``exc``, as ``rpc_async`` does: for code that
    refuses a call before any servicer runs (``server.security.auth``)."""
    await context.abort_with_status(error_status(exc, method))
