"""A Spark driver killed in the middle of phase two: the old compacted view stays, the
partial ledger is listed as pending under its lease, and after a restart it is gone —
no ledger is left that no topic references."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Api

pytestmark = pytest.mark.spark

DRIVER_TIMEOUT_S = 240.0


def referenced_and_all(data_dir: Any) -> tuple[set[int], set[int]]:
    store = LedgerStore(data_dir / "ledgers", ServerSettings(topic_defaults={}))
    try:
        referenced = set()
        for name in store.topic_names():
            topic = store.topic(name)
            referenced |= {led.ledger_id for led in topic.ledgers}
            if topic.compacted_ledger_id() is not None:
                referenced.add(topic.compacted_ledger_id())
        return referenced, set(store._ledgers)
    finally:
        store.close()
        del store
        gc.collect()


def test_driver_killed_mid_phase_two(server_factory: Any, api: Any, tmp_path: Any) -> None:
    srv = server_factory()
    a: Api = api(srv.address)
    topic = "kill-me"
    a.create(topic, ledger_max_entries="2000")
    a.publish(topic, [pb.Record(key=b"k%d" % i, value=b"old") for i in range(500)])
    a.admin.Compact(pb.CompactRequest(topic=topic, wait=True))
    old_ledger = a.layout(topic).compacted_ledger_id
    # > 4096 winners: phase two appends several batches; the driver pauses after the first
    a.publish(topic, [pb.Record(key=b"n%d" % i, value=b"new") for i in range(9000)])
    old_view = a.read(topic, True)  # compacted ledger + raw tail
    driver_log = tmp_path / "driver.log"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "COMPACTLOG_PAUSE_AT": "after_append:600000",
    }
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "compactlog",
            "--server",
            srv.address,
            "admin",
            "topics",
            "compact",
            topic,
            "--engine",
            "spark",
            "--spark-master",
            "local[1]",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=driver_log.open("wb"),
        start_new_session=True,  # its own process group: the driver and its JVM die together
    )
    try:
        deadline = time.monotonic() + DRIVER_TIMEOUT_S
        pending: list[pb.PendingLedger] = []
        while time.monotonic() < deadline and driver.poll() is None:
            pending = [p for p in a.layout(topic).pending if p.entries > 0]
            if pending:
                break
            time.sleep(0.2)
        assert pending, (
            "the Spark driver never reached phase two: " + driver_log.read_text()[-3000:]
        )
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have exited by itself
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    partial = pending[0].ledger_id
    assert 0 < pending[0].entries < 9500
    assert a.read(topic, True) == old_view
    assert a.layout(topic).compacted_ledger_id == old_ledger
    status = a.status(topic)
    assert status.last_run.engine == "local"

    srv.restart()
    b: Api = api(srv.address)
    assert not b.layout(topic).pending
    assert b.read(topic, True) == old_view
    srv.stop()
    referenced, stored = referenced_and_all(srv.data_dir)
    assert partial not in stored
    assert stored == referenced
