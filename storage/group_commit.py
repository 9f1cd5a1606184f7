"""Group commit: many writers, one fsync.

A writer applies its batch to RocksDB (WAL written, not yet synced), takes a ticket
and waits. One syncer thread fsyncs the WAL for every ticket issued before the sync
began, then wakes them together, the way BookKeeper's journal acknowledges a group
of adds with one force-write. Tickets are issued after the write returns, so a sync
that starts after a ticket covers that write. A writer with nothing more to write may
run the sync itself (``sync_here``) when none is running, as the first writer of a
RocksDB write group leads it: an idle request then costs its fsync and no thread hop.
The syncer is woken only when there is a sync for it to start (a ticket while none runs,
tickets left over when a caller's sync ends), never by a sync's end alone; and a writer
that will decide after its write who syncs takes its tickets ``held`` (they wake nobody),
then syncs them itself or hands them over (``kick``). At idle each needless wake-up of
the syncer was two or three more context switches a publish, on a shared core.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from compactlog.errors import StoreClosed

Synced = Callable[[BaseException | None], None]


class GroupCommit:
    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        lock = threading.RLock()  # one lock, two wake-ups: each kind of waiter its own
        self._cond = threading.Condition(lock)  # ``wait``'s waiters: a sync ended
        self._work = threading.Condition(lock)  # the syncer: a sync to start
        self._issued = 0
        self._synced = 0
        self._error: Exception | None = None
        self._closed = False
        self._syncing = False  # a sync is running (the syncer's or a caller's)
        self._callbacks: list[tuple[int, Synced]] = []  # in ticket order
        self.syncs = 0  # how many fsyncs ran, for metrics and tests
        self.wakeups = 0  # how many times the syncer thread was woken, for tests
        self._local = threading.local()  # ``held`` on this thread
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    def ticket(self) -> int:
        with self._cond:
            self._issued += 1
            if not self._syncing and not getattr(self._local, "held", False):
                self._work.notify()  # a running sync's end wakes the syncer itself
            return self._issued

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Tickets this thread takes inside wake no syncer: the caller decides after
        (``sync_here`` with nothing more to write, else ``kick``)."""
        self._local.held = True
        try:
            yield
        finally:
            self._local.held = False

    def kick(self) -> None:
        """Wake the syncer for what is issued and unsynced, unless a sync runs (its end
        does): a held writer with more to write leaves the fsync to it."""
        with self._cond:
            if not self._syncing and self._issued > self._synced:
                self._work.notify()

    def wait(self, ticket: int) -> None:
        """Block until the write behind ``ticket`` is on disk."""
        with self._cond:
            if not self._syncing and self._synced < ticket:
                self._work.notify()  # a ticket taken ``held`` has woken nobody yet
            while self._synced < ticket:
                if self._error is not None:
                    raise self._error
                if self._closed:
                    raise StoreClosed("the store closed before the write was synced")
                self._cond.wait()

    def when_synced(self, ticket: int, done: Synced) -> None:
        """Call ``done(None)`` once the write behind ``ticket`` is on disk (at once if it
        is), ``done(error)`` if the sync fails or the store closes first. ``done`` runs
        on the syncer thread (or the caller's) and must be quick."""
        with self._cond:
            if self._synced < ticket and self._error is None and not self._closed:
                self._callbacks.append((ticket, done))
                return
            error = self._error if self._synced < ticket else None
            if error is None and self._synced < ticket:
                error = StoreClosed("the store closed before the write was synced")
        done(error)

    def _take_callbacks(self, upto: int | None) -> list[Synced]:
        """Callbacks of tickets up to ``upto`` (all with None), under the lock."""
        cut = len(self._callbacks)
        if upto is not None:
            cut = next((i for i, (t, _d) in enumerate(self._callbacks) if t > upto), cut)
        taken = [done for _t, done in self._callbacks[:cut]]
        del self._callbacks[:cut]
        return taken

    def sync_here(self) -> None:
        """Sync what is issued on the caller's thread, now, if no sync is running: an idle
        writer's fast path. A lone request then waits for its fsync alone, not also for
        the syncer thread to wake (and win the interpreter); the syncer waits meanwhile."""
        with self._cond:
            if (
                self._syncing
                or self._issued == self._synced
                or self._error is not None
                or self._closed
            ):
                return
            self._syncing = True
            target = self._issued
        self._sync_to(target)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._syncing or (self._issued == self._synced and not self._closed):
                    self._work.wait()
                    self.wakeups += 1
                if self._error is not None or (self._closed and self._issued == self._synced):
                    return
                self._syncing = True
                target = self._issued
            if not self._sync_to(target):
                return

    def _sync_to(self, target: int) -> bool:
        """One fsync covering every ticket up to ``target`` (``_syncing`` set by the
        caller), then their callbacks; False when it failed (every waiter fails, loudly)."""
        try:
            self._sync()
        except Exception as exc:
            with self._cond:
                self._error = exc
                self._syncing = False
                self._cond.notify_all()
                self._work.notify()
                failed = self._take_callbacks(None)
            for done in failed:
                done(exc)
            return False
        with self._cond:
            self._synced = target
            self._syncing = False
            self.syncs += 1
            self._cond.notify_all()
            if self._issued > target:  # written meanwhile: the syncer's next sync
                self._work.notify()
            ready = self._take_callbacks(target)
        for done in ready:
            done(None)
        return True

    def close(self) -> None:
        """Sync what is pending, then stop the syncer."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            self._work.notify()
        self._thread.join()
        with self._cond:
            late = self._take_callbacks(None)
        for done in late:
            done(StoreClosed("the store closed before the write was synced"))


class SyncTicket:
    """A write behind a group-commit ticket (0: nothing to wait for): ``on_durable`` as
    an ``Appended`` has it, so an asyncio caller waits without holding a thread."""

    def __init__(self, commit: GroupCommit, ticket: int) -> None:
        self.commit, self.ticket = commit, ticket

    def on_durable(self, done: Synced) -> None:
        if self.ticket:
            self.commit.when_synced(self.ticket, done)
        else:
            done(None)
