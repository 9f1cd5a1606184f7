"""The worker's end of its pipe with the server (``compactor/worker_link.py``), over a real
duplex pipe with the server's end played by a thread: a job that asks from one thread
while another polls for cancels and reports gets its own answer, and no CANCEL is lost."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from multiprocessing import Pipe
from multiprocessing.connection import Connection

import pytest

from compactlog.compactor.progress import Progress, RunCancelled
from compactlog.compactor.worker_link import CANCEL, Reply, Report, Request, WorkerLink


def _serve(conn: Connection, cancel_before: int | None, seen: list[object]) -> None:
    """The server's end: each Request answered with its body doubled; a CANCEL sent just
    before the answer to request number ``cancel_before``; Reports kept in ``seen``."""
    asked = 0
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if isinstance(msg, Request):
            asked += 1
            if asked == cancel_before:
                conn.send(CANCEL)
            assert isinstance(msg.body, int)
            conn.send(Reply(value=msg.body * 2))
        else:
            seen.append(msg)


class Served:
    """A duplex pipe whose server end a thread answers (``_serve``). Closing the
    worker's end ends that thread (EOF), which is joined before the server's end is
    closed: a thread still reading a closed end raised from the next test."""

    def __init__(self) -> None:
        self.worker, self.server = Pipe(duplex=True)
        self.thread: threading.Thread | None = None

    def serve(
        self, cancel_before: int | None = None, seen: list[object] | None = None
    ) -> Connection:
        args = (self.server, cancel_before, [] if seen is None else seen)
        self.thread = threading.Thread(target=_serve, args=args, daemon=True)
        self.thread.start()
        return self.worker

    def close(self) -> None:
        self.worker.close()
        if self.thread is not None:
            self.thread.join(10)
            assert not self.thread.is_alive(), "the server's thread did not end at EOF"
        self.server.close()


@pytest.fixture
def pipe() -> Iterator[Served]:
    served = Served()
    yield served
    served.close()


def _poll_until(link: WorkerLink, stop: threading.Event) -> None:
    while not stop.is_set():
        link.poll_cancel()
        link.report(Progress(phase="copy"))


def test_a_request_gets_its_answer_while_another_thread_polls(
    pipe: Served,
) -> None:
    seen: list[object] = []
    worker = pipe.serve(seen=seen)
    link = WorkerLink(worker, {})
    stop = threading.Event()
    poller = threading.Thread(target=_poll_until, args=(link, stop))
    poller.start()
    try:
        answers = [link.request(n) for n in range(300)]
    finally:
        stop.set()
        poller.join()
    assert answers == [2 * n for n in range(300)]
    assert not link.cancelled
    assert any(isinstance(m, Report) for m in seen)


def test_two_threads_asking_each_get_their_own_answer(
    pipe: Served,
) -> None:
    worker = pipe.serve()
    link = WorkerLink(worker, {})
    got: dict[int, list[tuple[int, object]]] = {0: [], 1: []}

    def ask(who: int) -> None:
        for n in range(200):
            body = 2 * n + who  # even from thread 0, odd from thread 1
            got[who].append((body, link.request(body)))

    threads = [threading.Thread(target=ask, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for who in (0, 1):
        assert len(got[who]) == 200
        assert all(answer == 2 * body for body, answer in got[who])


def test_a_cancel_read_while_waiting_for_an_answer_is_kept(
    pipe: Served,
) -> None:
    worker = pipe.serve(cancel_before=3)
    link = WorkerLink(worker, {})
    stop = threading.Event()
    poller = threading.Thread(target=_poll_until, args=(link, stop))
    poller.start()
    try:
        assert [link.request(n) for n in (1, 2, 3)] == [2, 4, 6]
    finally:
        stop.set()
        poller.join()
    assert link.poll_cancel()
    with pytest.raises(RunCancelled):
        link.check()
