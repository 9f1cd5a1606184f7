"""The group-commit floor's PublishStream, in process: each request stored once, every
reply after a WAL fsync covering it, in order, and a stream's error after the replies
of the requests before it. No gRPC and no timing: what the floor does, not how fast."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog.bench.dataplane_floor import PIPELINE_DEPTH, REPLY, Floor


def _requests(count: int, fail: bool = False) -> Iterator[bytes]:
    for i in range(count):
        yield b"request-%d" % i
    if fail:
        raise RuntimeError("the client went away")


def test_every_request_is_stored_and_answered_after_a_sync(tmp_path: Path) -> None:
    floor = Floor(tmp_path / "db", "group-commit")
    try:
        replies = list(floor.publish_stream(_requests(50), None))
        assert replies == [REPLY] * 50
        assert floor.seq == 50 and 1 <= floor.syncs <= 50
        assert floor.db[(50).to_bytes(8, "big")] == b"request-49"
    finally:
        floor.db.close()


def test_an_error_ends_the_stream_after_the_replies_before_it(tmp_path: Path) -> None:
    floor = Floor(tmp_path / "db", "group-commit")
    try:
        replies: list[bytes] = []
        with pytest.raises(RuntimeError, match="went away"):
            replies.extend(floor.publish_stream(_requests(3, fail=True), None))
        assert replies == [REPLY] * 3
    finally:
        floor.db.close()


def test_synced_puts_sync_each_request(tmp_path: Path) -> None:
    floor = Floor(tmp_path / "db")
    try:
        assert list(floor.publish_stream(_requests(4), None)) == [REPLY] * 4
        assert floor.seq == 4 and floor.syncs == 0  # its fsyncs are the puts' own
    finally:
        floor.db.close()


def test_a_closed_reply_stream_stops_the_intake(tmp_path: Path) -> None:
    floor = Floor(tmp_path / "db", "group-commit")
    try:
        replies = floor.publish_stream(_requests(10_000), None)
        assert next(replies) == REPLY
        time.sleep(0.2)  # the intake fills the queue and waits on it
        replies.close()  # what gRPC does to a cancelled stream's generator
        time.sleep(0.5)  # the intake gives up within 0.1 s
        stopped = floor.seq
        time.sleep(0.3)
        assert floor.seq == stopped < 10 * PIPELINE_DEPTH  # a few groups, not 10,000
    finally:
        floor.db.close()
