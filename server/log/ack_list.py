"""``Log.AcknowledgeList``: many individual acks in one request, one cursor write a log.

pulsar-client users acknowledge each message on its own; their client groups those acks
(100 ms or 1,000) and sends the group as one CommandAck with a list of ids. This is that
command: the ids go to the log each belongs to (a partitioned ``NAME``'s to their
partitions), every id of every log is checked before any is applied (one this subscription
was never given is NOT_DELIVERED, naming it, and nothing is stored), and each log stores
its part as one change of its cursor: one WriteBatch and one group commit (LEDGER), one
journal line and one fsync (SEGMENTED), however many ids it holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from compactlog.errors import NotDelivered
from compactlog.server.log.dispatchers import Dispatchers, subscription_cursor
from compactlog.storage.topic_log import Pending, TopicLog
from compactlog.storage.types import MessageId

Run = Callable[..., Awaitable[Any]]
Groups = Sequence[tuple[TopicLog, list[MessageId]]]


async def acknowledge_list(
    run: Run,
    durable: Callable[[Pending], Awaitable[None]],
    dispatchers: Dispatchers,
    groups: Groups,
    subscription: str,
) -> None:
    """Store every group's acks (``run``: on the storage executor), then wait until all
    are durable. With several logs (partitions), each is checked first, so that one
    refused id stores nothing anywhere; each log checks its own part again as it applies
    it, under its lock."""
    if len(groups) > 1:
        await run(_check_all, groups, subscription)
    stored = []
    for log, ids in groups:
        stored.append(await run(log.acknowledge_list, subscription, ids))
        dispatcher = dispatchers.get(log.name, subscription)
        if dispatcher is not None:  # not pending, not due again
            dispatcher.acknowledged_list(ids)
    await asyncio.gather(*map(durable, stored))  # group commits, shared with the others'


def _check_all(groups: Groups, subscription: str) -> None:
    for log, ids in groups:
        cursor = subscription_cursor(log, subscription)
        try:
            cursor.check_list(ids, lambda _id: True)
        except NotDelivered as exc:
            exc.metadata["topic"] = log.name
            raise
