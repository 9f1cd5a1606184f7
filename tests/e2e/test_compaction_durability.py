"""Compaction across restarts, the threshold trigger, retention, metrics.

The crashes of a run (worker and server) are in ``test_worker_crashes``."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from compactlog.storage import keys
from compactlog.storage.rocks import RocksDB
from compactlog.v1 import compactlog_pb2 as pb

Api = Any
pytestmark = pytest.mark.slow

BEFORE = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]
AFTER = [(b"b", b"2"), (b"c", b"1")]
OLD_VIEW = [(b"b", b"1"), (b"a", b"2"), (b"b", b"2"), (b"c", b"1")]
NEW_VIEW = [(b"a", b"2"), (b"b", b"2"), (b"c", b"1")]


def test_restart_keeps_compacted_view_and_status(
    server: Any, ledger_api: Callable[[str], Api]
) -> None:
    api = ledger_api(server.address)
    api.create("t")
    api.publish("t", *BEFORE)
    before = api.compact("t")
    server.restart()
    api = ledger_api(server.address)
    after = api.status("t")
    assert after == before and after.last_run.read == 3
    assert api.keys("t") == [(b"b", b"1"), (b"a", b"2")]


def test_second_compact_is_already_exists_and_cap_queues(
    server_factory: Any,
    ledger_api: Callable[[str], Api],
    expect_error: Callable[..., grpc.StatusCode],
) -> None:
    srv = server_factory(config='"compaction.max.concurrent" = 1\n', start=False)
    srv.start(extra_env={"COMPACTLOG_PAUSE_AT": "after_phase_one:700"})
    api = ledger_api(srv.address)
    for topic in ("x", "y"):
        api.create(topic)
        api.publish(topic, *BEFORE)
    started = time.monotonic()
    assert api.compact("x", wait=False).state == pb.CompactionStatus.RUNNING
    assert expect_error(lambda: api.compact("x")) == grpc.StatusCode.ALREADY_EXISTS
    assert api.compact("y", wait=False).state == pb.CompactionStatus.RUNNING
    final = api.wait_status("y", lambda s: s.state != pb.CompactionStatus.RUNNING)
    assert final.state == pb.CompactionStatus.SUCCESS
    assert time.monotonic() - started >= 1.4  # one slot: the runs did not overlap
    assert api.status("x").state == pb.CompactionStatus.SUCCESS


def test_error_status_and_metrics(server_factory: Any, ledger_api: Callable[[str], Api]) -> None:
    srv = server_factory(
        config='"compaction.phase.one.memory.bytes" = 1024\n',
        extra_args=["--metrics-listen", "127.0.0.1:0"],
    )
    api = ledger_api(srv.address)
    api.create("big")
    api.publish("big", *[(b"key-%05d" % i, b"v") for i in range(200)])
    partial = api.compact("big")  # the offset map fills: a prefix is compacted (Kafka's way)
    assert partial.state == pb.CompactionStatus.SUCCESS and 0 < partial.last_run.read < 200
    failed = api.compact("big")  # its compacted keys alone fill the map: no progress
    assert failed.state == pb.CompactionStatus.ERROR
    assert "compaction.phase.one.memory.bytes" in failed.last_error
    api.create("small")
    api.publish("small", (b"a", b"1"), (b"a", b"2"))
    assert api.compact("small").state == pb.CompactionStatus.SUCCESS
    port = next(
        m.group(1)
        for line in srv.stderr_lines
        if (m := re.search(r"metrics on http://[^:]+:(\d+)/", line))
    )

    def scrape() -> str:
        url = f"http://127.0.0.1:{port}/metrics"
        return str(urllib.request.urlopen(url, timeout=5).read().decode())

    text = scrape()
    assert 'compactlog_compaction_failed_total{topic="big"} 1.0' in text
    assert 'compactlog_compaction_succeeded_total{topic="big"} 1.0' in text
    assert 'compactlog_compaction_succeeded_total{topic="small"} 1.0' in text
    assert 'compactlog_compaction_removed_events_total{topic="small"} 1.0' in text
    assert 'compactlog_compaction_read_bytes_total{topic="small"}' in text
    assert 'compactlog_compaction_duration_seconds_count{topic="small"} 1.0' in text
    assert 'compactlog_compaction_compacted_entries{topic="small"} 1.0' in text
    assert 'compactlog_compaction_read_throughput_bytes_per_second{topic="small"}' in text
    api.admin.DeleteTopic(pb.DeleteTopicRequest(name="small"))
    text = scrape()
    assert 'topic="small"' not in text  # a deleted topic's series are gone
    assert 'compactlog_compaction_failed_total{topic="big"} 1.0' in text


def test_threshold_trigger_fires(server_factory: Any, ledger_api: Callable[[str], Api]) -> None:
    srv = server_factory(config='"compaction.monitor.interval.ms" = 100\n')
    api = ledger_api(srv.address)
    api.create("t", compaction_threshold_bytes="200")
    api.publish("t", (b"a", b"1"))
    time.sleep(0.4)
    assert api.status("t").state == pb.CompactionStatus.NOT_RUN  # under the threshold
    api.publish("t", *[(b"k%d" % (i % 5), b"x" * 20) for i in range(20)])
    status = api.wait_status("t", lambda s: s.state == pb.CompactionStatus.SUCCESS)
    assert status.state == pb.CompactionStatus.SUCCESS and status.last_run.kept == 6


def test_threshold_holds_raw_data_against_retention(
    server: Any, ledger_api: Callable[[str], Api]
) -> None:
    api = ledger_api(server.address)
    api.create(
        "t", ledger_max_entries="2", retention_bytes="0", compaction_threshold_bytes="1000000"
    )
    api.publish("t", *[(b"k%d" % i, b"v") for i in range(6)])
    info = api.admin.EnforceRetention(pb.EnforceRetentionRequest(topic="t"))
    assert info.stats.entries == 6  # the __compaction cursor holds everything not compacted


def test_retention_trimmed_raw_but_compacted_view_intact(
    server: Any, ledger_api: Callable[[str], Api]
) -> None:
    api = ledger_api(server.address)
    api.create("t", ledger_max_entries="2", retention_bytes="0")
    api.publish("t", *[(b"k%d" % (i % 3), b"v%d" % i) for i in range(7)])
    api.compact("t")
    info = api.admin.EnforceRetention(pb.EnforceRetentionRequest(topic="t"))
    assert info.stats.entries < 7
    want = [(b"k1", b"v4"), (b"k2", b"v5"), (b"k0", b"v6")]
    assert api.keys("t") == want
    api.publish("t", (b"k3", b"new"))
    api.compact("t")
    server.restart()
    api = ledger_api(server.address)
    assert api.keys("t") == [*want, (b"k3", b"new")]  # later runs carry the trimmed keys


def test_missing_compacted_ledger_is_data_loss(
    server: Any, ledger_api: Callable[[str], Api], expect_error: Callable[..., grpc.StatusCode]
) -> None:
    api = ledger_api(server.address)
    api.create("t")
    api.publish("t", *BEFORE)
    lid = api.compact("t").compacted_ledger_id
    server.stop()
    db = RocksDB(server.data_dir / "ledgers")
    from compactlog.storage.rocks import Batch

    batch = Batch()
    batch.delete(keys.ledger_meta_key(lid))
    batch.delete_range(*keys.ledger_range(lid))
    db.write(batch, sync=True)
    db.close()
    server.start()
    api = ledger_api(server.address)
    assert expect_error(lambda: api.read("t")) == grpc.StatusCode.DATA_LOSS
    assert len(api.read("t", compacted=False)) == 3  # raw reads unaffected


def test_delete_topic_deletes_compacted_ledger(
    server: Any, ledger_api: Callable[[str], Api], stored_ledgers: Callable[[Path], Any]
) -> None:
    api = ledger_api(server.address)
    api.create("t")
    api.publish("t", *BEFORE)
    api.compact("t")
    api.admin.DeleteTopic(pb.DeleteTopicRequest(name="t"))
    server.stop()
    assert stored_ledgers(server.data_dir) == (set(), set())
