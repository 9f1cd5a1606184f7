"""Group commit's idle fast path (``GroupCommit.sync_here``) over a real RocksDB WAL: a
caller with nothing more to write syncs on its own thread when no sync is running, leaves
a running one to the syncer thread, and a sync that fails there fails every waiter. The
syncer thread is woken only when there is a sync for it to start."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compactlog.storage.config import ServerSettings
from compactlog.storage.group_commit import GroupCommit
from compactlog.storage.ledger_log import LedgerTopicLog
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.rocks import RocksDB
from compactlog.storage.types import MessageId, Record


@pytest.fixture
def db(tmp_path: Path) -> Iterator[RocksDB]:
    opened = RocksDB(tmp_path / "db")
    yield opened
    opened.close()


@pytest.fixture
def no_switches() -> Iterator[None]:
    """The syncer thread, woken by a ticket, cannot take the interpreter before the test
    reaches ``sync_here`` (the test's thread never blocks in between)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    yield
    sys.setswitchinterval(before)


def recording(
    db: RocksDB, threads: list[str], gate: threading.Event | None = None
) -> Callable[[], None]:
    def sync() -> None:
        threads.append(threading.current_thread().name)
        if gate is not None:
            gate.wait(10)
        db.sync_wal()

    return sync


def test_an_idle_caller_syncs_on_its_own_thread(db: RocksDB, no_switches: None) -> None:
    threads: list[str] = []
    commit = GroupCommit(recording(db, threads))
    try:
        db.put(b"k", b"v")
        ticket = commit.ticket()
        done: list[tuple[str, BaseException | None]] = []
        commit.when_synced(ticket, lambda e: done.append((threading.current_thread().name, e)))
        commit.sync_here()
        here = threading.current_thread().name
        assert threads == [here]
        assert done == [(here, None)]  # answered on this thread, before sync_here returned
        commit.sync_here()  # nothing issued since: no second fsync
        assert commit.syncs == 1
    finally:
        commit.close()


def test_a_running_sync_is_left_to_the_syncer_thread(db: RocksDB) -> None:
    threads: list[str] = []
    gate = threading.Event()
    commit = GroupCommit(recording(db, threads, gate))
    try:
        first = commit.ticket()  # the syncer takes it and waits at the gate
        while not threads:
            threading.Event().wait(0.001)
        second = commit.ticket()
        commit.sync_here()  # a sync is running: returns at once, syncs nothing
        assert threads == ["group-commit"]
        gate.set()
        commit.wait(second)
        assert threads == ["group-commit", "group-commit"]
        assert commit.syncs == 2 and first < second
    finally:
        gate.set()
        commit.close()


def test_a_failed_sync_here_fails_every_waiter(db: RocksDB, no_switches: None) -> None:
    def broken() -> None:
        raise OSError(5, "Input/output error")

    commit = GroupCommit(broken)
    try:
        ticket = commit.ticket()
        errors: list[BaseException | None] = []
        commit.when_synced(ticket, errors.append)
        commit.sync_here()
        assert len(errors) == 1 and isinstance(errors[0], OSError)
        with pytest.raises(OSError):
            commit.wait(commit.ticket())  # nothing is acknowledged after a failed fsync
    finally:
        commit.close()


def test_the_syncer_is_woken_only_for_a_sync_to_start(db: RocksDB, no_switches: None) -> None:
    """Tickets taken while a caller's sync runs wake nobody; its end wakes the syncer once,
    for them (before, every ticket and every sync's end woke it)."""
    threads: list[str] = []
    gate = threading.Event()
    commit = GroupCommit(recording(db, threads, gate))
    taken: list[int] = []

    def more_writes() -> None:  # while the caller's sync waits at the gate
        while not threads:
            threading.Event().wait(0.001)
        for _ in range(10):
            db.put(b"k", b"v")
            taken.append(commit.ticket())
            threading.Event().wait(0.002)  # the syncer could run here, were it woken
        gate.set()

    helper = threading.Thread(target=more_writes)
    helper.start()
    try:
        db.put(b"k", b"v")
        commit.ticket()  # wakes the syncer, which finds the caller's sync running
        commit.sync_here()  # held at the gate until the helper has taken its tickets
        helper.join()
        commit.wait(taken[-1])
        assert threads == [threading.current_thread().name, "group-commit"]
        assert commit.syncs == 2
        assert commit.wakeups <= 2  # the first ticket's, and the caller's sync's end
    finally:
        gate.set()
        commit.close()


def test_a_held_ticket_waited_for_is_synced(db: RocksDB) -> None:
    """A caller that waits for a ticket it took ``held`` (which woke nobody) is not left
    waiting: ``wait`` wakes the syncer."""
    commit = GroupCommit(db.sync_wal)
    waited = threading.Event()

    def held_then_wait() -> None:
        with commit.held():
            db.put(b"k", b"v")
            commit.wait(commit.ticket())
        waited.set()

    try:
        threading.Thread(target=held_then_wait, daemon=True).start()
        assert waited.wait(10)
        assert commit.syncs == 1 and commit.wakeups == 1
    finally:
        commit.close()


def test_a_lone_ack_syncs_on_its_own_thread_and_wakes_no_syncer(tmp_path: Path) -> None:
    """An ack at idle (one, or an AcknowledgeList) is synced by the acking thread after
    the topic's lock (its ticket taken ``held``), as an idle writer's group is: one fsync
    each, the syncer thread never woken."""
    store = LedgerStore(tmp_path, ServerSettings(topic_defaults={}))  # fsync durability
    try:
        store.create_topic("t", {})
        store.append("t", [Record(b"k%d" % i, b"v") for i in range(12)])
        log = LedgerTopicLog(store, "t")
        log.delivered(log.open_cursor("s", latest=False), MessageId(1, 11))
        commit = store.group_commit
        syncs, woken = commit.syncs, commit.wakeups
        acks = [lambda e=e: log.acknowledge("s", MessageId(1, e), False) for e in range(6)]
        acks += [lambda f=f: log.acknowledge_list("s", [MessageId(1, f + i) for i in range(3)])
                 for f in (6, 9)]  # fmt: skip
        for ack in acks:  # one at a time: each on disk before the next
            durable = threading.Event()
            ack().on_durable(lambda error, d=durable: d.set() if error is None else None)
            assert durable.wait(10)
        assert commit.syncs - syncs == 8
        assert commit.wakeups == woken
        assert store.topic("t").cursors["s"].mark_delete == MessageId(1, 11)
    finally:
        store.close()
