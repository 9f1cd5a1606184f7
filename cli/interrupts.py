"""Ctrl-C in the commands that stream (``produce`` from stdin, ``read``): a flag, never an
exception raised inside gRPC.

Python turns SIGINT into a ``KeyboardInterrupt`` raised in the main thread at whatever
bytecode it is running. A command reading a gRPC stream spends its time inside grpcio's
own code (the stream's ``Condition.wait`` loop, the ``with`` blocks around it, the
channel's ``operate``), and an exception raised there, between a lock's release and the
``try`` that restores it, or between its acquisition and the ``with`` body, leaves that
code half done: a lock released twice (``RuntimeError``, exit 1 instead of 130), a lock
left held, or the channel's spin thread killed by an event it cannot match; the last two
can make ``Client.close()`` (gRPC's ``channel.close()``, which waits for every call of
the channel to drain) wait forever. That was ``read --follow`` not ending after Ctrl-C.

So the first SIGINT only sets ``stop``, and ``then`` (cancelling the stream) runs on a
helper thread started beforehand: the main thread leaves its loop through the stream's
ordinary end. The handler is in place before the command opens its channel, so no
SIGINT reaches gRPC as an exception. The second SIGINT raises ``KeyboardInterrupt`` as
usual, a way out should the first not be enough.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def first_interrupt_stops(
    stop: threading.Event, then: Callable[[], None] | None = None
) -> Iterator[None]:
    """The first SIGINT sets ``stop`` and has ``then`` run on a helper thread; the next
    one raises ``KeyboardInterrupt``. Outside the main thread (signal handlers belong to
    it) nothing is installed and Ctrl-C stays an abort."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wake = threading.Event()

    def helper() -> None:
        wake.wait()
        if stop.is_set() and then is not None:
            then()

    def first(signum: int, frame: Any) -> None:
        stop.set()
        wake.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    if then is not None:
        threading.Thread(target=helper, name="compactlog-interrupt", daemon=True).start()
    previous = signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:  # None: the handler before was not set from Python and cannot be put back
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
        wake.set()
