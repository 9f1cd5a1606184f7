"""A topic deleted and created again while a compaction of it runs: the run belongs to the
deleted topic and must leave nothing in the new one (ISSUE 13: "deleting and re-creating
a topic between a compaction's seal and commit mixes the deleted topic's records into the
new one").

LEDGER: the run is paused at a fault point (``COMPACTLOG_PAUSE_AT``), the topic deleted,
created again and published to; the run's commit must fail and the new topic's views hold
only its own records. SEGMENTED: a cleaner pass slowed by the cleaner's I/O throttle is
running when the topic is deleted and created again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compactlog.storage import keys
from compactlog.storage.cursor import COMPACTED_LEDGER_PROPERTY
from compactlog.storage.rocks import RocksDB
from compactlog.v1 import compactlog_pb2 as pb

Api = Any
PAUSE_MS = 1500
OLD = [(b"a", b"old-1"), (b"b", b"old-1"), (b"a", b"old-2")]
NEW = [(b"x", b"new-1"), (b"a", b"new-1"), (b"x", b"new-2")]


def unreferenced_ledgers(data_dir: Path) -> set[int]:
    """Ledgers stored that no topic list or compaction cursor references (server stopped)."""
    db = RocksDB(data_dir / "ledgers")
    try:
        stored = {keys.ledger_id_of_meta_key(k) for k, _ in db.scan(*keys.ledger_meta_range())}
        for _k, v in db.scan(*keys.topic_range()):
            stored -= set(json.loads(v)["ledgers"])
        for _k, v in db.scan(b"C", b"D"):
            stored.discard(int(json.loads(v)["properties"].get(COMPACTED_LEDGER_PROPERTY, 0)))
        return stored
    finally:
        db.close()


@pytest.mark.parametrize(
    "point",
    ["after_phase_one", "after_seal"],
    ids=["new ledger made after the re-creation", "between seal and commit"],
)
def test_a_run_of_a_deleted_ledger_topic_commits_nothing_into_its_successor(
    server_factory: Any, ledger_api: Callable[[str], Api], point: str
) -> None:
    srv = server_factory(start=False)
    srv.start(extra_env={"COMPACTLOG_PAUSE_AT": f"{point}:{PAUSE_MS}"})
    api = ledger_api(srv.address)
    api.create("t")
    api.publish("t", *OLD)
    assert api.compact("t", wait=False).state == pb.CompactionStatus.RUNNING
    time.sleep(0.3)  # the run is at its pause now
    api.admin.DeleteTopic(pb.DeleteTopicRequest(name="t"))
    api.create("t")
    api.publish("t", *NEW)
    time.sleep(PAUSE_MS / 1000 + 1.0)  # the old run has woken and tried to commit

    assert api.keys("t", compacted=True) == NEW  # no compaction yet: the raw log
    assert api.keys("t", compacted=False) == NEW
    status = api.status("t")
    assert status.compacted_ledger_id == 0 and not status.HasField("horizon")
    assert status.state == pb.CompactionStatus.NOT_RUN
    assert api.compact("t").state == pb.CompactionStatus.SUCCESS
    assert api.keys("t") == [(b"a", b"new-1"), (b"x", b"new-2")]
    srv.stop()
    assert unreferenced_ledgers(srv.data_dir) == set()  # the failed run's ledger is gone


# The cleaner paces itself every 64 KiB at the least buffer size: a pass over the ~330 kB
# topic below takes seconds.
CLEANER_CONFIG = (
    '"log.cleaner.io.max.bytes.per.second" = 100000\n"log.cleaner.io.buffer.size" = 512\n'
)
SEGMENTED_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "16384",
    "min.cleanable.dirty.ratio": "1",  # only explicit passes: the test starts its own
}


def _segmented(api: Api, name: str) -> None:
    req = pb.CreateTopicRequest(name=name, kind=pb.SEGMENTED, config=SEGMENTED_CONFIG)
    api.admin.CreateTopic(req)


def test_a_cleaner_pass_of_a_deleted_segmented_topic_leaves_its_successor_alone(
    server_factory: Any, ledger_api: Callable[[str], Api]
) -> None:
    srv = server_factory(config=CLEANER_CONFIG)
    api = ledger_api(srv.address)
    _segmented(api, "t")
    for first in range(0, 300, 10):  # many segments, many duplicate keys
        api.publish(
            "t",
            *[(b"k%d" % (i % 4), b"old-%03d" % i + b"." * 1000) for i in range(first, first + 10)],
        )
    assert api.compact("t", wait=False).state == pb.CompactionStatus.RUNNING
    time.sleep(0.5)  # the throttled pass is under way
    api.admin.DeleteTopic(pb.DeleteTopicRequest(name="t"), timeout=30)
    _segmented(api, "t")
    new = [(b"k%d" % (i % 2), b"new-%03d" % i) for i in range(6)]
    for pair in new:
        api.publish("t", pair)

    assert api.keys("t", compacted=False) == new
    status = api.status("t")  # the aborted pass was the deleted topic's, not this one's
    assert status.state == pb.CompactionStatus.NOT_RUN and not status.last_error
    assert api.compact("t").state == pb.CompactionStatus.SUCCESS
    view = api.keys("t", compacted=False)
    assert all(value.startswith(b"new-") for _k, value in view)  # type: ignore[union-attr]
    assert view[-2:] == new[-2:]
