"""Cores of their own for the workers: a pinned pool's workers run on the last usable
cores, this process's threads step off them while a run is in flight (all of them, also
threads started before), and get every usable core back when the last run ends."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from compactlog.compactor.progress import LocalRunControl
from compactlog.compactor.worker_cores import CoreSplit, server_steps_off
from compactlog.compactor.worker_probe import ProbeAnswer, ProbeJob
from compactlog.compactor.workers import WorkerPool

USABLE = frozenset(os.sched_getaffinity(0))


def echo(body: object) -> object:
    return body


def test_the_split_takes_the_last_cores_and_leaves_the_server_one() -> None:
    split = CoreSplit.plan(workers=1)
    if len(USABLE) < 2:  # nothing to split: nothing is pinned
        assert split is None
        return
    assert split is not None and split.usable == USABLE
    assert split.workers == {max(USABLE)} and split.server == USABLE - {max(USABLE)}
    many = CoreSplit.plan(workers=64)
    assert many is not None and len(many.server) == 1 and many.server == {min(USABLE)}
    assert CoreSplit.plan(workers=1, enabled=False) is None


def test_threads_step_off_while_runs_are_in_flight_and_come_back() -> None:
    split = CoreSplit(usable=frozenset({0, 1}), workers=frozenset({1}))
    if not {0, 1} <= USABLE:
        pytest.skip("needs cores 0 and 1")
    started = threading.Event()
    stop = threading.Event()
    seen: list[frozenset[int]] = []

    def older_thread() -> None:  # started before the run: moved too
        started.set()
        stop.wait(10)
        seen.append(frozenset(os.sched_getaffinity(0)))

    before = threading.Thread(target=older_thread)
    before.start()
    started.wait(5)
    try:
        with server_steps_off(split):
            with server_steps_off(split):  # a second run at once
                assert os.sched_getaffinity(0) == {0}
            assert os.sched_getaffinity(0) == {0}  # one run still in flight
            stop.set()
            before.join(10)
        assert seen == [frozenset({0})]
        assert os.sched_getaffinity(0) == {0, 1}  # the last run ended
    finally:
        os.sched_setaffinity(0, USABLE)


@pytest.fixture
def pinned() -> Iterator[WorkerPool]:
    split = CoreSplit.plan(workers=1)
    made = WorkerPool(1, split)
    yield made
    made.close()
    os.sched_setaffinity(0, USABLE)


def test_a_pinned_pools_worker_runs_on_its_cores_and_the_server_steps_off(
    pinned: WorkerPool,
) -> None:
    if pinned.cores is None:
        pytest.skip("one usable core: nothing is pinned")
    during: list[object] = []
    runner = threading.Thread(
        target=lambda: during.append(
            pinned.run(ProbeJob(sleep_s=1.0), echo, LocalRunControl(), "probe")
        )
    )
    runner.start()
    deadline = time.monotonic() + 20
    while not pinned.pids() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the job is in the worker now
    assert os.sched_getaffinity(0) == pinned.cores.server
    runner.join(30)
    (answer,) = during
    assert isinstance(answer, ProbeAnswer) and answer.cores == pinned.cores.workers
    assert os.sched_getaffinity(0) == USABLE
    answer = pinned.run(ProbeJob(), echo, LocalRunControl(), "probe")
    assert isinstance(answer, ProbeAnswer) and answer.cores == pinned.cores.workers
