"""CONTRACT section 7 end to end: WatchCompaction, CancelCompaction, PreviewCompaction and
VerifyCompaction against the real server process, slowed down where a run must be caught
in the act (``COMPACTLOG_PAUSE_AT``, the cleaner's I/O throttle)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from compactlog import cli
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import ledger_census as stored_ledgers
from .test_as_of_reads import reason_of
from .test_compaction_durability import AFTER, BEFORE, OLD_VIEW

Api = Any
S = pb.CompactionStatus


def watch(api: Api, topic: str) -> list[tuple[float, pb.CompactionProgress]]:
    """Every update of a WatchCompaction stream with its arrival time."""
    stream = api.admin.WatchCompaction(pb.WatchCompactionRequest(topic=topic), timeout=60)
    return [(time.monotonic(), update) for update in stream]


def paused_server(server_factory: Any, point: str, ms: int) -> Any:
    srv = server_factory(start=False)
    srv.start(extra_env={"COMPACTLOG_PAUSE_AT": f"{point}:{ms}"})
    return srv


def test_watch_reports_a_slow_run_every_second_and_ends_with_its_state(
    server_factory: Any, ledger_api: Callable[[str], Api]
) -> None:
    srv = paused_server(server_factory, "after_create", 2500)
    api = ledger_api(srv.address)
    api.create("t")
    api.publish("t", *BEFORE, *AFTER)
    assert api.compact("t", wait=False).state == S.RUNNING
    updates = watch(api, "t")
    times = [t for t, _ in updates]
    assert len(updates) >= 5 and max(b - a for a, b in itertools.pairwise(times)) < 1.0
    running, last = [u for _t, u in updates[:-1]], updates[-1][1]
    assert all(u.state == S.RUNNING for u in running)
    assert last.state == S.SUCCESS and (last.phase, last.done, last.total) == ("commit", 1, 1)
    assert last.elapsed_ms >= 2500 and last.bytes_written > 0
    assert "phase-two" in {u.phase for u in running}  # paused after creating its ledger
    assert watch(api, "t")[0][1].state == S.SUCCESS  # no run now: the state, once


def test_watch_of_a_topic_never_compacted_sends_its_state_and_ends(
    server: Any, ledger_api: Callable[[str], Api], expect_error: Callable[..., Any]
) -> None:
    api = ledger_api(server.address)
    api.create("t")
    (_t, only), *rest = watch(api, "t")
    assert not rest and only.state == S.NOT_RUN and only.phase == ""
    assert expect_error(lambda: watch(api, "nope")) == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("point", "phase"),
    [("after_phase_one", "phase-one"), ("after_append", "phase-two"), ("after_seal", "commit")],
)
def test_cancel_in_each_phase_leaves_the_old_view_and_no_orphan(
    server_factory: Any, ledger_api: Callable[[str], Api], point: str, phase: str
) -> None:
    srv = server_factory()
    api = ledger_api(srv.address)
    api.create("t")
    api.publish("t", *BEFORE)
    api.compact("t")
    api.publish("t", *AFTER)
    srv.stop()
    srv.start(extra_env={"COMPACTLOG_PAUSE_AT": f"{point}:1500"})
    api = ledger_api(srv.address)
    assert api.compact("t", wait=False).state == S.RUNNING
    time.sleep(0.5)  # the run is paused at ``point``, in ``phase``
    status = api.admin.CancelCompaction(pb.CancelCompactionRequest(topic="t"), timeout=30)
    assert status.state == S.CANCELLED and status.last_run.read == 3  # the previous run's
    assert api.keys("t") == OLD_VIEW
    srv.restart()
    api = ledger_api(srv.address)
    assert api.status("t").state == S.CANCELLED and api.keys("t") == OLD_VIEW
    srv.stop()
    stored, referenced = stored_ledgers(srv.data_dir)
    assert stored == referenced  # the cancelled run's ledger is gone


def test_cancel_without_a_run_is_failed_precondition(
    server: Any, ledger_api: Callable[[str], Api], expect_error: Callable[..., Any]
) -> None:
    api = ledger_api(server.address)
    api.create("t")
    cancel = api.admin.CancelCompaction
    assert (
        expect_error(lambda: cancel(pb.CancelCompactionRequest(topic="t")))
        == grpc.StatusCode.FAILED_PRECONDITION
    )
    assert (
        expect_error(lambda: cancel(pb.CancelCompactionRequest(topic="nope")))
        == grpc.StatusCode.NOT_FOUND
    )


def test_a_cancelled_run_waiting_for_a_slot_never_starts(
    server_factory: Any, ledger_api: Callable[[str], Api]
) -> None:
    srv = server_factory(config='"compaction.max.concurrent" = 1\n', start=False)
    srv.start(extra_env={"COMPACTLOG_PAUSE_AT": "after_phase_one:1500"})
    api = ledger_api(srv.address)
    for topic in ("x", "y"):
        api.create(topic)
        api.publish(topic, *BEFORE)
    api.compact("x", wait=False)
    api.compact("y", wait=False)  # waits for x's slot
    status = api.admin.CancelCompaction(pb.CancelCompactionRequest(topic="y"), timeout=30)
    assert status.state == S.CANCELLED and not status.compacted_ledger_id
    assert api.wait_status("x", lambda s: s.state != S.RUNNING).state == S.SUCCESS


def test_preview_has_the_figures_of_the_following_run(
    server: Any, ledger_api: Callable[[str], Api]
) -> None:
    api = ledger_api(server.address)
    api.create("t", ledger_max_entries="5")
    api.publish("t", *[(b"k%d" % (i % 4), b"v" * i) for i in range(17)], (None, b"x"))
    api.publish("t", (b"k1", None), (b"k2", b""))
    preview = api.admin.PreviewCompaction(pb.PreviewCompactionRequest(topic="t"))
    assert api.status("t").state == S.NOT_RUN  # the status did not change
    run = api.compact("t").last_run
    assert preview.read == 20 and preview.kept == 2 and preview.removed == 18
    assert (preview.tombstones, preview.keyless_dropped) == (3, 1)  # b"" is one too
    for name in ("read", "kept", "removed", "tombstones", "keyless_dropped", "bytes_in"):
        assert getattr(preview, name) == getattr(run, name), name
    assert preview.bytes_out == run.bytes_out
    nothing = api.admin.PreviewCompaction(pb.PreviewCompactionRequest(topic="t"))
    assert nothing.read == 0  # a run now would have nothing to do


def test_verify_passes_on_a_healthy_topic_and_detects_a_tampered_ledger(
    server: Any,
    ledger_api: Callable[[str], Api],
    tamper: Callable[..., int],
    capsys: pytest.CaptureFixture[str],
) -> None:
    api = ledger_api(server.address)
    api.create("t")
    api.publish("t", *BEFORE)
    api.compact("t")
    api.publish("t", *AFTER)
    api.compact("t")
    healthy = api.admin.VerifyCompaction(pb.VerifyCompactionRequest(topic="t"))
    assert healthy.ok and healthy.checked == 3 and not healthy.problems
    assert healthy.horizon.entry_id == 4 and healthy.compacted_ledger_id
    assert cli.main(["--server", server.address, "admin", "topics", "verify", "t"]) == 0
    assert "ok:               yes" in capsys.readouterr().out
    server.stop()

    def change(msgs: list[pb.Message]) -> list[pb.Message]:
        msgs[1].value = b"not what was published"
        return msgs

    store = LedgerStore(server.data_dir / "ledgers", ServerSettings(topic_defaults={}))
    tamper(store, "t", change)
    store.close()
    server.start()
    api = ledger_api(server.address)
    broken = api.admin.VerifyCompaction(pb.VerifyCompactionRequest(topic="t"))
    assert not broken.ok and "differs" in broken.problems[0] and broken.checked == 3
    assert broken.digest != healthy.digest
    assert cli.main(["--server", server.address, "admin", "topics", "verify", "t"]) == 1
    assert "problem:" in capsys.readouterr().out


# ---- SEGMENTED topics: the cleaner pass ----------------------------------------------


def test_segmented_pass_is_watched_as_cleaning_and_can_be_cancelled(
    server_factory: Any, connect: Callable[[str], Any], expect_error: Callable[..., Any]
) -> None:
    srv = server_factory(config='"log.cleaner.io.max.bytes.per.second" = 100000.0\n')
    stubs = connect(srv.address)
    stubs.admin.CreateTopic(
        pb.CreateTopicRequest(
            name="s",
            kind=pb.SEGMENTED,
            config={
                "cleanup.policy": "compact",
                "segment.bytes": "65536",
                "min.cleanable.dirty.ratio": "1",
            },
        )
    )
    latest = {}
    for i in range(16):  # 400 kB in 7 segments: a pass of several seconds at 100 kB/s
        batch = [
            (b"k%d" % (j % 50), b"%05d" % j + b"x" * 95) for j in range(i * 250, i * 250 + 250)
        ]
        stubs.publish("s", *batch)
        latest.update(batch)
    assert stubs.admin.Compact(pb.CompactRequest(topic="s")).state == S.RUNNING
    seen: list[pb.CompactionProgress] = []
    stream = stubs.admin.WatchCompaction(pb.WatchCompactionRequest(topic="s"), timeout=60)
    reader = threading.Thread(target=lambda: [seen.append(u) for u in stream], daemon=True)
    reader.start()
    deadline = time.monotonic() + 30  # the worker starts first: slow on a loaded machine
    while not any(u.done for u in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    status = stubs.admin.CancelCompaction(pb.CancelCompactionRequest(topic="s"), timeout=30)
    reader.join(10)
    assert status.state == S.CANCELLED
    assert seen and seen[-1].state == S.CANCELLED
    assert {u.phase for u in seen} == {"cleaning"} and any(u.done for u in seen)
    verify = stubs.admin.VerifyCompaction  # no raw history to recompute from
    req = pb.VerifyCompactionRequest(topic="s")
    assert expect_error(lambda: verify(req)) == grpc.StatusCode.FAILED_PRECONDITION
    reads = stubs.log.Read(pb.ReadRequest(topic="s"), timeout=30)
    values = {m.key: m.value for r in reads for m in r.messages}
    assert values == latest  # what the cancelled pass swapped in is a correct cleaning


def segmented(stubs: Any, name: str, policy: str = "compact") -> None:
    stubs.admin.CreateTopic(
        pb.CreateTopicRequest(
            name=name,
            kind=pb.SEGMENTED,
            config={
                "cleanup.policy": policy,
                "segment.bytes": "4096",
                "min.cleanable.dirty.ratio": "1",  # no background pass in between
            },
        )
    )


def test_segmented_preview_is_a_dry_pass_with_the_figures_of_the_following_one(
    server: Any, connect: Callable[[str], Any], capsys: pytest.CaptureFixture[str]
) -> None:
    stubs = connect(server.address)
    segmented(stubs, "s")
    for i in range(8):  # about 20 kB in several segments, then one more in the active one
        batch = [(b"k%d" % (j % 30), b"%05d" % j + b"x" * 60) for j in range(i * 40, i * 40 + 40)]
        stubs.publish("s", *batch)
    stubs.publish("s", (None, b"keyless"), (b"k1", None), (b"k2", b""))
    stubs.publish("s", *[(b"k%d" % j, b"new") for j in range(200)])
    root = server.data_dir / "segments"

    def files() -> dict[str, bytes]:  # the topic's segments and the cleaner's checkpoint
        found = [*sorted((root / "s").iterdir()), *root.glob("~server/cleaner-*")]
        return {str(p.relative_to(root)): p.read_bytes() for p in found}

    before = files()
    preview = stubs.admin.PreviewCompaction(pb.PreviewCompactionRequest(topic="s"), timeout=60)
    assert files() == before
    status = stubs.admin.GetCompactionStatus(pb.GetCompactionStatusRequest(topic="s"))
    assert status.state == S.NOT_RUN  # the dry pass is no run
    assert preview.read > 0 and 0 < preview.kept < preview.read
    assert preview.bytes_out < preview.bytes_in and preview.keyless_dropped == 1
    run = stubs.admin.Compact(pb.CompactRequest(topic="s", wait=True), timeout=60).last_run
    for name in ("read", "kept", "removed", "tombstones", "keyless_dropped", "bytes_in"):
        assert getattr(preview, name) == getattr(run, name), name
    assert preview.bytes_out == run.bytes_out
    assert (
        cli.main(["--server", server.address, "admin", "topics", "compact", "s", "--dry-run"]) == 0
    )
    assert "dry run:" in capsys.readouterr().out
    segmented(stubs, "d", policy="delete")
    call = stubs.admin.PreviewCompaction
    code, reason = reason_of(lambda: call(pb.PreviewCompactionRequest(topic="d")))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "NOT_COMPACTED")


def test_a_preview_whose_caller_gives_up_frees_its_worker(
    server_factory: Any, ledger_api: Callable[[str], Api]
) -> None:
    """A preview reads in the worker at the cleaner's throttle (100 kB/s: several seconds
    here); its caller's deadline passes, the worker stops and is free for the next call at
    once, and the server logs no error for it."""
    srv = server_factory(config='"log.cleaner.io.max.bytes.per.second" = 100000.0\n')
    api = ledger_api(srv.address)
    api.create("big")
    for i in range(8):  # about 500 kB
        api.publish(
            "big", *[(b"k%d" % (j % 50), b"x" * 200) for j in range(i * 300, i * 300 + 300)]
        )
    api.create("small")
    api.publish("small", (b"a", b"1"), (b"a", b"2"))
    request = pb.PreviewCompactionRequest(topic="big")
    with pytest.raises(grpc.RpcError) as info:
        api.admin.PreviewCompaction(request, timeout=0.5)
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    started = time.monotonic()
    small = api.admin.PreviewCompaction(pb.PreviewCompactionRequest(topic="small"), timeout=30)
    assert small.read == 2 and small.kept == 1
    assert time.monotonic() - started < 3.0  # not behind the rest of the big preview
    time.sleep(0.5)
    assert not [line for line in srv.stderr_lines if "unexpected error" in line]
