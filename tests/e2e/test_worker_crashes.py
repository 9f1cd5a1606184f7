"""Crash safety of compaction in worker processes, by crashing them (issue 12, item 4).

A run's steps happen in a compaction worker, its commit in the server. The worker is
killed with SIGKILL at each step (``COMPACTLOG_CRASH_AT``: the worker kills itself there),
or by the test while the server commits; the server is killed while a worker runs. Each
time: the run ends ERROR naming the worker, the previous compacted view (or, after the
commit, the new one) is intact, nothing is left behind (no ledger nobody references, no
SST file, no ``.cleaned`` segment), and after a server kill no worker lives on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from compactlog.compactor.two_phase import FAULT_POINTS
from compactlog.v1 import compactlog_pb2 as pb

Api = Any
pytestmark = pytest.mark.slow

BEFORE = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]
AFTER = [(b"b", b"2"), (b"c", b"1")]
OLD_VIEW = [(b"b", b"1"), (b"a", b"2"), (b"b", b"2"), (b"c", b"1")]
NEW_VIEW = [(b"a", b"2"), (b"b", b"2"), (b"c", b"1")]
SEG_LAYOUT = [b"K1", b"K2", b"K1", b"K1", b"K3", b"K2"]


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (its compaction workers)."""
    out: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as fh:
            out += [int(p) for p in fh.read().split()]
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {check}")


def leftovers(data_dir: Path) -> list[str]:
    """Files a run may leave: SST files and secondaries, .cleaned/.swap segments."""
    work = [p.name for p in (data_dir / "compaction-work").glob("*")]
    segs = [p.name for p in (data_dir / "segments").rglob("*") if p.suffix in (".cleaned", ".swap")]
    return work + segs


def compacted_once(server_factory: Any, ledger_api: Callable[[str], Api]) -> tuple[Any, Api]:
    """A server whose topic ``t`` has the OLD view: compacted once, then two more records."""
    srv = server_factory()
    api = ledger_api(srv.address)
    api.create("t")
    api.publish("t", *BEFORE)
    assert api.compact("t").state == pb.CompactionStatus.SUCCESS
    api.publish("t", *AFTER)
    srv.stop()
    return srv, api


def assert_clean_after_restart(srv: Any, ledger_api: Callable[[str], Api],
                               stored_ledgers: Callable[[Path], Any]) -> None:  # fmt: skip
    """A later run succeeds; after a restart nothing unreferenced is stored."""
    srv.start()
    api = ledger_api(srv.address)
    assert api.compact("t").state == pb.CompactionStatus.SUCCESS
    assert api.keys("t") == NEW_VIEW
    srv.stop()
    stored, referenced = stored_ledgers(srv.data_dir)
    assert stored == referenced
    assert leftovers(srv.data_dir) == []


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_worker_killed_at_each_step(
    server_factory: Any,
    ledger_api: Callable[[str], Api],
    stored_ledgers: Callable[[Path], Any],
    point: str,
) -> None:
    srv, _ = compacted_once(server_factory, ledger_api)
    srv.start(extra_env={"COMPACTLOG_CRASH_AT": point})
    api = ledger_api(srv.address)
    status = api.compact("t")
    assert status.state == pb.CompactionStatus.ERROR
    assert "compaction worker" in status.last_error and "SIGKILL" in status.last_error
    assert srv.proc.poll() is None  # the server is unharmed
    committed = FAULT_POINTS.index(point) >= FAULT_POINTS.index("after_commit")
    assert api.keys("t") == (NEW_VIEW if committed else OLD_VIEW)
    srv.stop()
    stored, referenced = stored_ledgers(srv.data_dir)
    assert stored == referenced  # cleaned up at once, not only at the next start-up
    assert leftovers(srv.data_dir) == []
    assert_clean_after_restart(srv, ledger_api, stored_ledgers)


def test_worker_killed_while_the_server_commits(
    server_factory: Any, ledger_api: Callable[[str], Api], stored_ledgers: Callable[[Path], Any]
) -> None:
    """The server finishes the commit it began; the run is ERROR, the new view stands."""
    srv, _ = compacted_once(server_factory, ledger_api)
    srv.start(extra_env={"COMPACTLOG_PAUSE_AT": "after_ingest:1500"})
    api = ledger_api(srv.address)
    assert api.compact("t", wait=False).state == pb.CompactionStatus.RUNNING
    worker = wait_for(lambda: children(srv.proc.pid))[0]
    wait_for(lambda: any("ingested, committing" in line for line in srv.stderr_lines))
    os.kill(worker, 9)  # the server is inside the pause after the ingest
    status = api.wait_status("t", lambda s: s.state != pb.CompactionStatus.RUNNING)
    assert status.state == pb.CompactionStatus.ERROR and str(worker) in status.last_error
    assert api.keys("t") == NEW_VIEW
    srv.stop()
    stored, referenced = stored_ledgers(srv.data_dir)
    assert stored == referenced and leftovers(srv.data_dir) == []


def test_server_crash_between_ingest_and_commit(
    server_factory: Any, ledger_api: Callable[[str], Api], stored_ledgers: Callable[[Path], Any]
) -> None:
    srv, _ = compacted_once(server_factory, ledger_api)
    srv.start(extra_env={"COMPACTLOG_CRASH_AT": "after_ingest"})
    api = ledger_api(srv.address)
    with pytest.raises(grpc.RpcError):
        api.compact("t")
    assert srv.wait(10) == 137
    srv.start()
    api = ledger_api(srv.address)
    assert api.keys("t") == OLD_VIEW
    assert api.status("t").last_error == "interrupted by restart"
    srv.stop()
    stored, referenced = stored_ledgers(srv.data_dir)
    assert stored == referenced  # the ingested ledger was collected at start-up
    assert_clean_after_restart(srv, ledger_api, stored_ledgers)


def test_server_killed_while_a_worker_runs(
    server_factory: Any, ledger_api: Callable[[str], Api], stored_ledgers: Callable[[Path], Any]
) -> None:
    srv, _ = compacted_once(server_factory, ledger_api)
    srv.start(extra_env={"COMPACTLOG_PAUSE_AT": "after_append:30000"})
    api = ledger_api(srv.address)
    api.compact("t", wait=False)
    worker = wait_for(lambda: children(srv.proc.pid))[0]
    wait_for(lambda: list((srv.data_dir / "compaction-work").glob("secondary-*")))
    srv.kill()
    wait_for(lambda: not alive(worker), timeout=5.0)  # PR_SET_PDEATHSIG / the watchdog
    srv.start()
    api = ledger_api(srv.address)
    assert api.keys("t") == OLD_VIEW
    assert api.status("t").last_error == "interrupted by restart"
    srv.stop()
    stored, referenced = stored_ledgers(srv.data_dir)
    assert stored == referenced and leftovers(srv.data_dir) == []


# ---- SEGMENTED: LogCleaner passes in a worker --------------------------------------------


def segmented(srv: Any, connect: Any) -> Any:
    stubs = connect(srv.address)
    cfg = {"cleanup.policy": "compact", "segment.bytes": "14", "min.cleanable.dirty.ratio": "1"}
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name="s", kind=pb.SEGMENTED, config=cfg))
    for i, key in enumerate(SEG_LAYOUT):
        assert stubs.publish("s", (key, b"v%d" % i)) == [(0, i)]
    return stubs


def offsets(stubs: Any) -> list[int]:
    req = pb.ReadRequest(topic="s")
    return [m.id.entry_id for r in stubs.log.Read(req, timeout=30) for m in r.messages]


@pytest.mark.parametrize("point", ["after_offset_map", "after_cleaned"])
def test_cleaning_worker_killed(server_factory: Any, connect: Any, point: str) -> None:
    srv = server_factory(start=False).start(extra_env={"COMPACTLOG_CRASH_AT": point})
    stubs = segmented(srv, connect)
    status = stubs.admin.Compact(pb.CompactRequest(topic="s", wait=True))
    assert status.state == pb.CompactionStatus.ERROR
    assert "compaction worker" in status.last_error and "SIGKILL" in status.last_error
    assert offsets(stubs) == list(range(6))  # nothing of the pass is visible
    assert leftovers(srv.data_dir) == []
    srv.stop()
    srv.start()
    stubs = connect(srv.address)
    status = stubs.admin.Compact(pb.CompactRequest(topic="s", wait=True))
    assert status.state == pb.CompactionStatus.SUCCESS
    assert offsets(stubs) == [1, 3, 4, 5]  # K2 at 1 stays: its 5 is in the active segment


def test_server_killed_while_a_cleaning_worker_runs(server_factory: Any, connect: Any) -> None:
    srv = server_factory(start=False).start(
        extra_env={"COMPACTLOG_PAUSE_AT": "after_cleaned:30000"}
    )
    stubs = segmented(srv, connect)
    stubs.admin.Compact(pb.CompactRequest(topic="s", wait=False))
    worker = wait_for(lambda: children(srv.proc.pid))[0]
    wait_for(lambda: [p for p in (srv.data_dir / "segments").rglob("*.cleaned")])
    srv.kill()
    wait_for(lambda: not alive(worker), timeout=5.0)
    srv.start()
    assert leftovers(srv.data_dir) == []  # start-up recovery removed the .cleaned segment
    stubs = connect(srv.address)
    assert offsets(stubs) == list(range(6))
