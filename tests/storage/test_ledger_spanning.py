"""A marked part of a spanning publish is stored at most once (storage/ledger_spanning.py).

The front sends a part again after a crash; the slot must answer a repeat with the first
append's ids and store nothing more, also across a reopen of the store, and forget kept
parts only below the front's floor.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.errors import MalformedRequest, RecordTooLarge
from compactlog.storage import batch as codec
from compactlog.storage import keys
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_spanning import FORGET_EVERY
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.spanning import (
    MARKER_SIZE,
    SpanningPart,
    decode_runs,
    encode_runs,
    marker_of,
)
from compactlog.storage.types import MessageId, Record
from compactlog.storage.views import view_messages
from compactlog.v1 import compactlog_pb2 as pb

FIRST, LAST = MessageId(0, 0), MessageId(2**63, 0)


def request(*values: bytes) -> bytes:
    return codec.records_to_request([Record(b"k", v) for v in values])


def stored(store: LedgerStore, topic: str) -> list[bytes | None]:
    return [m.value for m in view_messages(store, topic, FIRST, LAST, compacted=False)]


def test_the_marker_goes_first_and_round_trips() -> None:
    raw = pb.PublishRequest(topic="t", records=[pb.Record(key=b"k")]).SerializeToString()
    marked = SpanningPart(7, 5).encode() + raw  # as the front sends a part
    assert len(marked) == len(raw) + MARKER_SIZE
    assert marker_of(marked) == SpanningPart(7, 5)
    assert marker_of(raw) is None
    parsed = pb.PublishRequest.FromString(marked)  # an unknown field to the schema
    assert parsed.topic == "t" and len(parsed.records) == 1
    assert codec.encode_request(marked, 0, 1, 0, 0).count == 1  # the codec skips it
    runs = [(1, 0, 3), (2, 0, 1)]
    assert decode_runs(encode_runs(runs)) == runs
    with pytest.raises(ValueError):
        decode_runs(encode_runs(runs)[:-1])


@pytest.mark.parametrize("durability", ["fsync", "wal"])
def test_a_part_sent_twice_is_stored_once(
    open_store: Callable[..., LedgerStore], durability: str
) -> None:
    store = open_store(durability)
    store.create_topic("t-partition-1", {})
    part = SpanningPart(100, 100)
    first = store.append_request_start("t-partition-1", request(b"a", b"b"), 1, part).wait()
    again = store.append_request_start("t-partition-1", request(b"a", b"b"), 1, part).wait()
    assert first == again == [MessageId(1, 0), MessageId(1, 1)]
    assert stored(store, "t-partition-1") == [b"a", b"b"]
    # Another spanning publish with the same records is another publish.
    store.append_request_start("t-partition-1", request(b"a"), 1, SpanningPart(101, 100)).wait()
    assert stored(store, "t-partition-1") == [b"a", b"b", b"a"]


def test_a_repeat_after_a_reopen_answers_the_first_ids(
    open_store: Callable[..., LedgerStore],
) -> None:
    store = open_store()
    store.create_topic("t", {})
    part = SpanningPart(5, 5)
    first = store.append_request_start("t", request(b"x"), 0, part).wait()
    store = open_store()  # a restart: the ledger rolls over, the kept part stays
    assert store.append_request_start("t", request(b"x"), 0, part).wait() == first
    assert stored(store, "t") == [b"x"]


def test_kept_parts_are_forgotten_below_the_floor_only(
    open_store: Callable[..., LedgerStore],
) -> None:
    store = open_store()
    store.create_topic("t", {})
    old, young = 1, FORGET_EVERY + 50  # forgetting waits for FORGET_EVERY of floor
    store.append_request_start("t", request(b"1"), 0, SpanningPart(old, old)).wait()
    store.append_request_start("t", request(b"2"), 0, SpanningPart(young, old)).wait()
    assert store.db.get(keys.spanning_part_key(old, "t")) is not None
    # A part whose floor passed ``old`` (but not ``young``) forgets ``old``'s record.
    floor = young
    store.append_request_start("t", request(b"3"), 0, SpanningPart(young + 1, floor)).wait()
    assert store.db.get(keys.spanning_part_key(old, "t")) is None
    assert store.db.get(keys.spanning_part_key(young, "t")) is not None
    assert store.append_request_start("t", request(b"2"), 0, SpanningPart(young, floor)).wait()
    assert stored(store, "t") == [b"1", b"2", b"3"]


def test_a_part_over_the_limit_keeps_no_record(open_store: Callable[..., LedgerStore]) -> None:
    store = open_store()
    store.create_topic("t", {"max.message.bytes": "64"})
    part = SpanningPart(9, 9)
    with pytest.raises(RecordTooLarge):
        store.append_request_start("t", request(b"v" * 200), 0, part)
    assert store.db.get(keys.spanning_part_key(9, "t")) is None
    assert stored(store, "t") == []


def test_segmented_topics_refuse_a_marked_part(tmp_path: Path) -> None:
    from compactlog.storage.segmented.manager import SegmentedLogManager
    from compactlog.storage.segmented.topic_log import SegmentedTopicLog

    manager = SegmentedLogManager(tmp_path / "segments", ServerSettings(topic_defaults={}))
    manager.create_topic("s", {})
    log = SegmentedTopicLog(manager, "s")
    with pytest.raises(MalformedRequest, match="LEDGER"):
        log.append_request(request(b"v"), SpanningPart(1, 1))
    manager.close()
