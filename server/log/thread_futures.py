"""Storage calls back from its own threads; the asyncio server awaits a future.

A group commit tells a writer its sync happened by calling ``done(error)`` on the syncer
thread (``storage/group_commit.py``). ``future_of`` turns that into a future of the
running loop, settled on the loop's thread, so a handler awaits durability without a
thread of its own. A callback called on the loop's own thread (the write was durable
already: an ack whose executor step ran the fsync itself) settles the future at once,
so awaiting it costs no second turn of the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

Done = Callable[[BaseException | None], None]


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # cancelled meanwhile: nobody waits any more
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


def future_of(register: Callable[[Done], None]) -> asyncio.Future[None]:
    """A future done when the callback ``register`` was given is called (from any thread):
    with its error, or None."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    loop_thread = threading.get_ident()

    def done(error: BaseException | None) -> None:
        if threading.get_ident() == loop_thread:
            _settle(future, error)
        else:
            loop.call_soon_threadsafe(_settle, future, error)

    register(done)
    return future
