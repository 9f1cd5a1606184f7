"""The reply side of ``send_async``, shared by the threaded and the asyncio producers.

Both producers queue their sends in one ``publish_wire.Pending`` (``pending_for``), each
message's callback on its request's list, and hand a request's callbacks here when its
reply or its error comes: ``answer`` calls each back with its own id, in order, made from
the reply's first id and the message's place where the ids run (``cv.id_run``), else
read from the reply; ``fail`` calls each back with the request's error. A callback that
raises is logged and the next is called, so one application bug loses no other reply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from compactlog.client import _convert as cv
from compactlog.client import publish_wire as wire
from compactlog.client.enums import Result
from compactlog.client.message_id import MessageId
from compactlog.errors import CompactlogError, InvalidArgument
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["MAX_UNANSWERED", "SendCallback", "answer", "fail", "pending_for"]

SendCallback = Callable[[Result | CompactlogError, MessageId | None], None]
MAX_UNANSWERED = 10_000  # sends not yet called back before a sender waits for room
_log = logging.getLogger("compactlog.client.send_batches")


def pending_for(topic: str, max_messages: int, max_bytes: int) -> Any:
    """The queue of a producer's sends to ``topic``, as the requests they will go in."""
    return wire.Pending(wire.request_head(topic), max_messages, max_bytes, MAX_UNANSWERED)


def answer(callbacks: list[SendCallback], resp: pb.PublishResponse, one_log: bool) -> None:
    """Each message's callback with its id, in order (``Result.Ok``): made from the
    reply's first id where the ids run (``cv.id_run``), else read from each wire id
    (a partitioned topic's), both in the writer's one call."""
    ok, count, ids = Result.Ok, len(callbacks), resp.ids
    if len(ids) != count:  # not a reply this client can read: each send learns so
        fail(callbacks, InvalidArgument(f"a Publish reply of {len(ids)} ids for {count} records"))
        return
    run = cv.id_run(ids, one_log)
    done = 0
    while done < count:
        if run is not None:
            done, error = wire.call_back(callbacks, done, ok, run[0], run[1], MessageId)
        else:  # a partitioned topic's: each id read from the wire, in the same one call
            done, error = wire.call_back_ids(callbacks, done, ok, ids, MessageId)
        if error is not None:
            _log.error("a send_async callback raised", exc_info=error)


def fail(callbacks: list[SendCallback], error: CompactlogError) -> None:
    """Each message's callback with its request's error and no id."""
    for callback in callbacks:
        call(callback, error, None)


def call(
    callback: SendCallback, result: Result | CompactlogError, msg_id: MessageId | None
) -> None:
    try:
        callback(result, msg_id)
    except Exception:  # the application's: logged, the other sends go on
        _log.exception("a send_async callback raised")
