"""The front's fan-out tasks: none outlives the call that started it.

A call on a spread partitioned ``NAME`` asks several slots side by side. When one part
fails, the call answers with that failure at once; the parts still under way are then
cancelled and awaited before it does, and every part's outcome is retrieved, so that no
task runs on after its call nor leaves "Task exception was never retrieved" (or a task
"destroyed but it is pending") in the log. ``asyncio.gather`` alone does neither: on the
first failure it leaves the other awaitables running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a finished task's failure as seen (its caller has its own answer)."""
    if not task.cancelled():
        task.exception()


def start(parts: Iterable[Awaitable[T]]) -> list[asyncio.Future[T]]:
    """Each part as a task whose outcome is retrieved whenever it ends."""
    tasks: list[asyncio.Future[T]] = [asyncio.ensure_future(part) for part in parts]
    for task in tasks:
        task.add_done_callback(_retrieve)
    return tasks


async def settle(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Cancel the tasks still running and wait until every one has ended."""
    for task in tasks:
        task.cancel()  # nothing for a task already done
    if tasks:
        await asyncio.wait(tasks)


async def all_or_first_error(parts: Iterable[Awaitable[T]]) -> list[T]:
    """Every part's answer, in order; on the first failure the others are cancelled and
    awaited, then that failure is raised."""
    tasks = start(parts)
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        await settle(tasks)
